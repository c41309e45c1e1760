"""How a role's process is managed on its host: systemd units or pidfiles."""
