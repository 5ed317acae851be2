"""The lab's instruments at toy sizes (`assisted.lab`)."""
