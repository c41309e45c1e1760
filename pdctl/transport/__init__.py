"""How a command reaches a host: local subprocess or SSH. `connect(host)` picks one."""
