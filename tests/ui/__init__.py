"""The web app's parts without a server: formatting, the live stream, the device's line, a GPU
call's time (`assisted.ui`)."""
