"""SimuMax's ``simumax.core`` names: ``config`` and ``perf_llm``."""
