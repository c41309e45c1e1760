"""Small units that observe and judge. Each returns CheckResult values; none prints or exits."""
