"""KVSwitch controller: planning (pure, no I/O) and the runtime loop over target drivers."""
