"""`make demo` (`python -m seif.demo`): the engine and the runtime on the reference project,
explained call by call."""
