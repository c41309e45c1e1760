"""The bundled CPU engine (`engine/`): SGLang's flags and endpoints. Its drills reproduce the seed's degraded
bootstrap over every backend, and a failed transfer answers 200 with one token repeated (the symptom SGLang users
reported on older builds), so both judges stay strict for it."""

from pdctl.engines import EngineKind, register

KIND = register(EngineKind(name="bundled", module="engine.launch_server", repeats_token_on_failed_transfer=True))
