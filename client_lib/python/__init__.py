"""KVSwitch Python client library."""
