"""The lab's instruments at toy sizes (`lab`)."""
