"""The process memory setting of streamed training (streamwww._memory)."""

import os
import sys

import pytest

from streamwww import _memory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc setting")


@pytest.mark.parametrize("env,fixed", [({}, True), ({"STREAMWWW_RELEASE_MEMORY": "1"}, True),
                                       ({"STREAMWWW_RELEASE_MEMORY": "0"}, False),
                                       ({"STREAMWWW_RELEASE_MEMORY": "off"}, False),
                                       ({"MALLOC_ARENA_MAX": "2"}, False)])
def test_fixed_malloc_thresholds_by_default_unless_switched_off(monkeypatch, env, fixed):
    calls = []

    class Libc:
        def mallopt(self, param, value):
            calls.append((param, value))
            return 1

        def gnu_get_libc_version(self):
            return b"2.36"

    monkeypatch.setattr(_memory.ctypes, "CDLL", lambda name: Libc())
    monkeypatch.setattr(_memory, "_done", False)
    for name in [k for k in os.environ if k.startswith("MALLOC_") or k == _memory.ENV]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _memory.release_freed_memory()
    _memory.release_freed_memory()  # once per process
    assert calls == ([(-1, 4 << 20), (-3, 4 << 20)] if fixed else [])
