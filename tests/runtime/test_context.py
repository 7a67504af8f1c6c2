"""Children come from a forkserver that preloaded torch, with one thread per math library."""

from __future__ import annotations

import pytest

try:  # the child imports its target by module name; this works whether or not tests/ is a package
    from tests import _shared_child
except ImportError:
    import _shared_child


@pytest.mark.slow
def test_forkserver_children_run_one_thread_per_library():
    from a3c.runtime.context import ONE_THREAD, child_context

    ctx = child_context()
    reader, writer = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_shared_child.report_threads, args=(writer,), daemon=True)
    child.start()
    writer.close()
    try:
        assert reader.poll(60), "the child sent nothing within 60 s"
        report = reader.recv()
        child.join(timeout=30)
        assert child.exitcode == 0
    finally:
        if child.is_alive():
            child.kill()
            child.join(timeout=10)
    assert report["env"] == ONE_THREAD
    assert report["torch_threads"] == 1
