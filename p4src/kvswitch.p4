// KVSwitch data plane, v1model top level (being written).
