"""What the configuration loaders' tests read secrets through: an environment that records
every key looked at, and a keychain that records every entry asked for."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

KEYCHAIN_TOKEN = "keychain-token-91b7e3"


class RecordingEnv(Mapping[str, str]):
    """An environment that remembers every key looked at, and whether it was listed."""

    def __init__(self, data: Mapping[str, str]) -> None:
        self._data = dict(data)
        self.read: list[str] = []
        self.listed = False

    def __getitem__(self, key: str) -> str:
        self.read.append(key)
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        self.listed = True
        return iter(self._data)

    def __len__(self) -> int:
        self.listed = True
        return len(self._data)


class FakeKeyring:
    def __init__(self, entries: Mapping[str, str], fail: bool = False) -> None:
        self.entries = dict(entries)
        self.fail = fail
        self.calls: list[tuple[str, str]] = []

    def __call__(self, service: str, name: str) -> str | None:
        self.calls.append((service, name))
        if self.fail:
            raise RuntimeError(f"backend locked {KEYCHAIN_TOKEN}")
        return self.entries.get(name)
