"""Default values of the storm, triage and `verify inflight` options: constants only, no imports.

The CLI shows these in `--help` without importing the ops modules (and their thread pools, HTTP clients), so that
`pdctl --help` stays fast. The ops modules import their defaults from here, so the two never drift.
"""

# `pdctl verify inflight` and the inflight layer of final-health
INFLIGHT_WINDOW_S = 30.0
INFLIGHT_INTERVAL_S = 3.0

# `pdctl triage`: a short quiet window (no traffic of ours) before the health/e2e layers
TRIAGE_WINDOW_S = 6.0
TRIAGE_INTERVAL_S = 2.0

# `pdctl storm`: the seed's numbers
SEED_REQUESTS = 90
SEED_PROMPT_TOKENS = 20_000
SEED_ABORT_MIN_S = 0.1
SEED_ABORT_MAX_S = 3.0
SEED_SAMPLE_EVERY_S = 12.0
SEED_WATCH_S = 60.0
STORM_TARGET = "random"
STORM_CALIBRATE = 3
STORM_MAX_NEW_TOKENS = 128
