"""The trial record and the stored format."""
