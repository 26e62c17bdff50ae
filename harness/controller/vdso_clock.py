"""Move a running process's clocks by patching its vDSO (x86_64 Linux, as root).

A Go program (etcd) reads the time through the vDSO, never through libc, so libfaketime cannot
reach it. The mechanism is the one of Chaos Mesh's TimeChaos, written anew here: every thread of
the process is stopped with ptrace (``PTRACE_SEIZE`` + ``PTRACE_INTERRUPT``), a small piece of
code is written into the unused tail of the process's own ``[vdso]`` mapping (the kernel maps
the vDSO's whole ELF image, page aligned; the bytes after its section headers are zero), and
the first five bytes of ``clock_gettime``, ``gettimeofday`` and ``time`` become a ``jmp`` to
that code. The writes go through ``/proc/PID/mem``, which copies the page on write: only this
process sees them. The threads then go on.

The injected code asks the kernel (a real ``syscall``) and adds the offset for the clock ids
whose bit is set in a mask: ``wall`` is ``CLOCK_REALTIME``, ``_COARSE``, ``CLOCK_TAI``,
``gettimeofday`` and ``time``; ``monotonic`` is ``CLOCK_MONOTONIC``, ``_RAW``, ``_COARSE`` and
``CLOCK_BOOTTIME`` (Go's runtime reads ``CLOCK_MONOTONIC`` for its timers and leases);
``both`` is their union. The offset and the mask live in the patch's data, in the tracee: a
later :func:`shift` rewrites only them. ``time()`` adds whole seconds (the floor of the
offset). :func:`reset` (and ``shift(pid, clock, 0)`` once no clock is left moved) copies the
controller's own vDSO back over the tracee's: the same kernel maps the same image into every
process, containers included, so the tracee's vDSO is then byte for byte pristine.

No thread may be stopped inside the bytes being rewritten (the jump's five bytes, or the
injected code when it is removed), nor be running a signal handler that will return there (the
kernel delivers a signal when a ``syscall`` returns: a Go thread in the injected code's
``syscall`` often runs the runtime's SIGURG handler next, its interrupted context in the code;
were the code zeroed meanwhile, its ``sigreturn`` would fault there, and Go, seeing the return
address into ``time.now`` on top of the stack, turns the fault into a panic whose first
traceback meets ``time.now``'s stack switch: ``fatal error: traceback``). Such a stop is let go
and tried again a moment later: a thread's signal frames are found on its stack above its
``sp`` (their ``sigcontext``). The patch is removed in two stops: the jumps first, then the
code, once the threads that were inside it (in its ``syscall``, most often) have returned.

Moving a Go process's monotonic clock back (the undo of a forward move, or a backward move)
is felt by its runtime beyond the reads: sysmon's ``retake`` (Go 1.19 proc.go:5314-5315)
preempts a goroutine that has run ``forcePreemptNS`` since ``schedwhen``, a time read on the
moved clock, so a goroutine that never yields is not preempted, and one waiting for its P not
run, until the true clock has caught up: the probe's answer after undoing an 8 s move came
8.0 s late in 7 of 24 undos (never after a wall clock move). That is what a monotonic clock
going back does to Go, not a fault of the patch; a fault that moves it must expect it.

The injected code (GNU as, Intel syntax; ``STUB`` is its assembled bytes)::

    magic: .ascii "LHVDSO01"           # 0x00
    mask:  .quad 0                     # 0x08: bit i set: clock id i is moved
    sec:   .quad 0                     # 0x10: floor(offset)
    nsec:  .quad 0                     # 0x18: (offset - sec) in ns, 0 <= nsec < 1e9
    usec:  .quad 0                     # 0x20: the same in us
    cg:    mov eax, 228                # 0x28: clock_gettime(edi = id, rsi = ts)
           syscall
           test rax, rax ; jnz 9f
           mov ecx, edi ; cmp ecx, 63 ; ja 9f
           mov rdx, [rip+mask] ; bt rdx, rcx ; jnc 9f
           mov rcx, [rip+sec] ; add [rsi], rcx
           mov rdx, [rsi+8] ; add rdx, [rip+nsec]
           cmp rdx, 1000000000 ; jl 1f
           sub rdx, 1000000000 ; inc qword ptr [rsi]
       1:  mov [rsi+8], rdx
       9:  ret
    gtod:  mov eax, 96                 # 0x75: gettimeofday(rdi = tv, rsi = tz)
           syscall
           test rax, rax ; jnz 9f ; test rdi, rdi ; jz 9f
           mov rdx, [rip+mask] ; bt rdx, 0 ; jnc 9f
           mov rcx, [rip+sec] ; add [rdi], rcx
           mov rdx, [rdi+8] ; add rdx, [rip+usec]
           cmp rdx, 1000000 ; jl 1f
           sub rdx, 1000000 ; inc qword ptr [rdi]
       1:  mov [rdi+8], rdx
       9:  ret
    tm:    mov eax, 201                # 0xc1: time(rdi = tloc)
           syscall
           cmp rax, -4095 ; jae 9f
           mov rdx, [rip+mask] ; bt rdx, 0 ; jnc 9f
           add rax, [rip+sec]
           test rdi, rdi ; jz 9f ; mov [rdi], rax
       9:  ret
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
import math
import os
import platform
import signal
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.controller.procs import ProcessTable, owned, start_time
from harness.core.atomic import write_json
from harness.core.errors import HarnessError

CLOCKS = ("wall", "monotonic", "both")
# clock ids (linux/time.h): REALTIME 0, MONOTONIC 1, MONOTONIC_RAW 4, REALTIME_COARSE 5,
# MONOTONIC_COARSE 6, BOOTTIME 7, TAI 11
WALL_MASK = (1 << 0) | (1 << 5) | (1 << 11)
MONOTONIC_MASK = (1 << 1) | (1 << 4) | (1 << 6) | (1 << 7)
MASKS = {"wall": WALL_MASK, "monotonic": MONOTONIC_MASK, "both": WALL_MASK | MONOTONIC_MASK}

MAGIC = b"LHVDSO01"
STUB = bytes.fromhex(
    "4c485644534f3031" + "00" * 32
    + "b8e40000000f054885c0754089f983f93f7739488b15c6ffffff480fa3ca732c488b0dc1ffffff48010e"
    "488b5608480315bbffffff4881fa00ca9a3b7c0a4881ea00ca9a3b48ff0648895608c3"
    "b8600000000f054885c0753f4885ff743a488b157bffffff480fbae200732c488b0d75ffffff48010f"
    "488b570848031577ffffff4881fa40420f007c0a4881ea40420f0048ff0748895708c3"
    "b8c90000000f05483d01f0ffff731d488b1531ffffff480fbae200730f4803052bffffff4885ff7403"
    "488907c3")
ENTRIES = {"clock_gettime": 0x28, "gettimeofday": 0x75, "time": 0xc1}  # symbol: stub offset
DATA = struct.Struct("<8sQqqq")  # magic, mask, sec, nsec, usec
JUMP = 5  # jmp rel32

_PTRACE_GETREGS, _PTRACE_DETACH = 12, 17
_PTRACE_SEIZE, _PTRACE_INTERRUPT = 0x4206, 0x4207
_WALL = 0x40000000
_EVENT_STOP = 128
_RIP, _RSP = 16, 19  # indexes in struct user_regs_struct (27 unsigned longs)
# A signal frame's struct sigcontext (x86_64): ip, flags, then cs, gs, fs (u16, the kernel
# writes __USER_CS and two zeros) 16 bytes after ip; a frame is found by that mark.
_SIGCONTEXT_CS = struct.pack("<HHH", 0x33, 0, 0)
_SS_DISABLE = 2  # uc_stack.ss_flags: no signal stack (the frame is on the thread's stack)
SIGNAL_STACK = 64 * 1024  # bytes above a stopped thread's sp searched for signal frames
RECORD = "vdso-patched.json"  # in the run dir: the pids a patch may be left in (harness clean)
RETRIES = 200  # stops that caught a thread inside the bytes to rewrite, before giving up


class VdsoError(HarnessError):
    """The patch cannot be applied or removed (ptrace denied, an unknown vDSO layout, ...)."""


@dataclass(frozen=True)
class Vdso:
    """Where a process's vDSO is, and where the patch goes in it."""

    start: int
    image: bytes  # the mapping's bytes as the process has them now
    entries: dict[str, int]  # symbol -> offset of the function in the image
    stub: int  # offset of the injected code in the image

    def data(self) -> tuple[int, float] | None:
        """(mask, offset) of the patch in this image, or None when it is not patched."""
        magic, mask, sec, nsec, _ = DATA.unpack_from(self.image, self.stub)
        return (mask, sec + nsec / 1e9) if magic == MAGIC else None


def shift(pid: int, clock: str, offset: float, during: Callable[[], None] | None = None) -> None:
    """Move ``clock`` (wall, monotonic, both) of process ``pid`` to ``offset`` seconds from the
    true time; 0 puts it back (and removes the patch once no clock is moved). ``during`` runs
    while the process is stopped, before the patch is written: a move that goes with it (an
    offset file libfaketime reads) is seen by the process at the same moment."""
    if clock not in MASKS:
        raise VdsoError(f"unknown clock {clock!r} (one of {', '.join(CLOCKS)})")
    if not math.isfinite(offset):
        raise VdsoError(f"clock offset {offset} is not a finite number")
    vdso = locate(pid)
    current = vdso.data()
    mask, old = current if current is not None else (0, 0.0)
    if offset == 0:
        mask &= ~MASKS[clock]
        if mask == 0 or old == 0:
            reset(pid, during)
            return
        offset = old  # the other clock stays where it is
    elif current is not None and mask & ~MASKS[clock] and old != offset:
        raise VdsoError(f"pid {pid}: its other clock is moved by {old:+g} s: one offset per "
                        "process (undo it first)")
    else:
        mask = MASKS[clock] if current is None else mask | MASKS[clock]
    sec = math.floor(offset)
    nsec = min(round((offset - sec) * 1e9), 999_999_999)
    data = DATA.pack(MAGIC, mask, sec, nsec, nsec // 1000)
    if current is not None:
        with stopped(pid, ()):
            _call(during)
            _write(pid, vdso.start + vdso.stub, data)
        return
    code = data + STUB[DATA.size:]
    jumps = {vdso.entries[name]: _jump(vdso.entries[name], vdso.stub + at)
             for name, at in ENTRIES.items()}
    with stopped(pid, [(vdso.start + e + 1, vdso.start + e + JUMP) for e in jumps]):
        _call(during)
        _write(pid, vdso.start + vdso.stub, code)
        for entry, jump in jumps.items():
            _write(pid, vdso.start + entry, jump)


def reset(pid: int, during: Callable[[], None] | None = None) -> None:
    """Remove the patch from ``pid`` (nothing to do when it has none): its vDSO is pristine.
    ``during`` as in :func:`shift`."""
    vdso = locate(pid)
    if vdso.data() is None:
        _call(during)
        return
    pristine = own_vdso()[1]
    if len(pristine) != len(vdso.image) or pristine[:64] != vdso.image[:64]:
        raise VdsoError(f"pid {pid}: its vDSO is not this kernel's (cannot restore it)")
    jumps = [(vdso.start + vdso.entries[n] + 1, vdso.start + vdso.entries[n] + JUMP)
             for n in ENTRIES]
    code = (vdso.start + vdso.stub, vdso.start + vdso.stub + len(STUB))
    with stopped(pid, jumps):  # first the jumps: no thread enters the injected code after this
        _call(during)
        _write(pid, vdso.start, pristine[:vdso.stub])
        _write(pid, code[1], pristine[vdso.stub + len(STUB):])
    with stopped(pid, [code]):  # then the code, once no thread is still inside it
        _write(pid, code[0], pristine[vdso.stub:vdso.stub + len(STUB)])


def _call(during: Callable[[], None] | None) -> None:
    if during is not None:
        during()


def patched(pid: int) -> tuple[int, float] | None:
    """(mask, offset) of the patch in ``pid``, or None when its vDSO is not patched."""
    return locate(pid).data()


def moved_clocks(pid: int) -> dict[str, float]:
    """The clocks the patch in ``pid`` moves, each with its offset ({}: not patched)."""
    patch = patched(pid)
    if patch is None:
        return {}
    mask, offset = patch
    return {c: offset for c in ("wall", "monotonic") if mask & MASKS[c]}


def pristine(pid: int) -> bool:
    """Is ``pid``'s vDSO byte for byte this kernel's (no patch, and nothing left of one)?"""
    return locate(pid).image == own_vdso()[1]


def shift_node(procs: ProcessTable, db: object, name: str, clock: str, offset: float,
               during: Callable[[], None] | None = None) -> None:
    """A backend's ``set_clock`` for a DB whose clocks are moved this way: patch the node's
    server process (its host pid: a container's server is a process of this machine too).
    The run dir keeps its pid while it is patched (for ``harness clean``) and what is moved
    on the node (for :func:`reapply`); the DB's ``vdso_clocks`` (when it has one) learns
    how to read the patch back (:func:`moved_clocks` of the pid). ``during`` as in
    :func:`shift`."""
    pid = procs.pid(name)
    if pid is None:
        raise VdsoError(f"{name}: its server is not running, so its clock cannot be moved")
    readers = getattr(db, "vdso_clocks", None)
    if isinstance(readers, dict):
        readers[name] = functools.partial(moved_clocks, pid)
    record = procs.path.with_name(RECORD)
    pids, moved = _load(record)
    pids[str(pid)] = start_time(pid)
    _save(record, pids, moved)  # before the patch
    try:
        shift(pid, clock, offset, during)
    except VdsoError as e:
        with suppress(VdsoError):
            if patched(pid) is None:  # nothing was written: nothing for harness clean
                pids.pop(str(pid))
                _save(record, pids, moved)
        raise VdsoError(f"{name}: {e}") from None
    patch = patched(pid)
    if patch is None:
        pids.pop(str(pid))
        moved.pop(name, None)
    else:
        moved[name] = list(patch)
    _save(record, pids, moved)


def reapply(procs: ProcessTable, db: object, name: str) -> None:
    """A backend's ``start``: a server restarted while its clock was moved (a crash fault
    during a clock fault) gets the move again; its old process's patch died with it."""
    _, moved = _load(procs.path.with_name(RECORD))
    if name in moved:
        mask, offset = moved[name]
        clock = next((c for c, m in MASKS.items() if m == mask), None)
        if clock is None:
            raise VdsoError(f"{name}: the recorded clock mask {mask:#x} is no clock id")
        shift_node(procs, db, name, clock, float(offset))


def reset_recorded(run_dir: Path) -> list[int]:
    """``harness clean``: undo the patch in every process of a dead run still patched (and
    still the process that was patched); the pids put back."""
    pids, _ = _load(run_dir / RECORD)
    undone = []
    for pid, started in pids.items():
        if pid.isdigit() and owned(int(pid), started):
            with suppress(VdsoError):
                if patched(int(pid)) is not None:
                    reset(int(pid))
                    undone.append(int(pid))
    (run_dir / RECORD).unlink(missing_ok=True)
    return undone


def _load(record: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        data = json.loads(record.read_text())
        return dict(data["pids"]), dict(data["moved"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}, {}


def _save(record: Path, pids: dict[str, Any], moved: dict[str, Any]) -> None:
    write_json(record, {"pids": pids, "moved": moved}, indent=1)


# the vDSO image ------------------------------------------------------------------------------

def vdso_range(pid: int | str) -> tuple[int, int]:
    try:
        with open(f"/proc/{pid}/maps") as fh:
            for line in fh:
                if line.rstrip().endswith("[vdso]"):
                    lo, hi = line.split()[0].split("-")
                    return int(lo, 16), int(hi, 16)
    except OSError as e:
        raise VdsoError(f"pid {pid}: cannot read its memory map: {e.strerror}") from None
    raise VdsoError(f"pid {pid}: has no [vdso] mapping")


def _read(pid: int | str, at: int, size: int) -> bytes:
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    except OSError as e:
        raise VdsoError(f"pid {pid}: cannot read its memory: {e.strerror}") from None
    try:
        return os.pread(fd, size, at)
    except OSError as e:
        raise VdsoError(f"pid {pid}: cannot read its vDSO: {e.strerror}") from None
    finally:
        os.close(fd)


def _write(pid: int, at: int, data: bytes) -> None:
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_WRONLY)
    except OSError as e:
        raise VdsoError(f"pid {pid}: cannot write its memory: {e.strerror}") from None
    try:
        if os.pwrite(fd, data, at) != len(data):
            raise VdsoError(f"pid {pid}: short write into its vDSO")
    except OSError as e:
        raise VdsoError(f"pid {pid}: cannot write its vDSO: {e.strerror}") from None
    finally:
        os.close(fd)


def own_vdso() -> tuple[int, bytes]:
    lo, hi = vdso_range("self")
    return lo, _read("self", lo, hi - lo)


def locate(pid: int) -> Vdso:
    """Read ``pid``'s vDSO and find its functions and the room for the patch in it."""
    if platform.machine() != "x86_64":
        raise VdsoError(f"the vDSO patch is written for x86_64, not {platform.machine()}")
    lo, hi = vdso_range(pid)
    image = _read(pid, lo, hi - lo)
    entries, end = parse(image)
    missing = [name for name in ENTRIES if name not in entries]
    if missing:
        raise VdsoError(f"pid {pid}: unknown vDSO layout (no {missing[0]} symbol)")
    stub = (end + 15) & ~15
    if stub + len(STUB) > len(image):
        raise VdsoError(f"pid {pid}: unknown vDSO layout (no room after its ELF image)")
    tail = image[stub:stub + len(STUB)]
    if tail[:8] != MAGIC and tail.strip(b"\0"):
        raise VdsoError(f"pid {pid}: unknown vDSO layout (its tail is not empty)")
    return Vdso(lo, image, entries, stub)


def parse(image: bytes) -> tuple[dict[str, int], int]:
    """The exported functions of a vDSO image (name -> offset, unversioned names, a
    ``__vdso_`` prefix dropped) and the end of its ELF contents."""
    if image[:4] != b"\x7fELF" or image[4] != 2 or image[5] != 1 or len(image) < 64:
        raise VdsoError("unknown vDSO layout (not a 64-bit little-endian ELF image)")
    shoff, = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", image, 0x3A)
    end = shoff + shentsize * shnum
    if shentsize != 64 or end > len(image):
        raise VdsoError("unknown vDSO layout (its section headers)")
    sections = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * 64) for i in range(shnum)]
    for _, kind, _, _, off, size, *_ in sections:
        end = max(end, off + (size if kind != 8 else 0))  # 8: SHT_NOBITS
    dynsym = [s for s in sections if s[1] == 11]  # SHT_DYNSYM
    if not dynsym or dynsym[0][6] >= shnum:
        raise VdsoError("unknown vDSO layout (no dynamic symbol table)")
    _, _, _, _, off, size, link, _, _, entsize = dynsym[0]
    stroff = sections[link][4]
    base = min((s[3] - s[4] for s in sections if s[3]), default=0)  # address - offset
    entries: dict[str, int] = {}
    for at in range(off, off + size, entsize or 24):
        name_at, info, _, _, value, _ = struct.unpack_from("<IBBHQQ", image, at)
        if info & 0xF != 2 or not value:  # STT_FUNC, defined
            continue
        name = image[stroff + name_at:image.index(b"\0", stroff + name_at)].decode()
        entries[name.removeprefix("__vdso_")] = value - base
    if end > len(image):
        raise VdsoError("unknown vDSO layout (its sections run past the mapping)")
    return entries, end


def _jump(at: int, to: int) -> bytes:
    return b"\xe9" + struct.pack("<i", to - (at + JUMP))


# ptrace ------------------------------------------------------------------------------------

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.ptrace.restype = ctypes.c_long
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]


def _ptrace(request: int, tid: int, data: int = 0, addr: int = 0) -> None:
    if _libc.ptrace(request, tid, addr, data) == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _pcs(pid: int, tid: int) -> list[int]:
    """Where stopped thread ``tid`` goes on: its pc, then the pc each signal frame on its stack
    returns to (innermost first; the handlers it is running)."""
    regs = (ctypes.c_ulonglong * 27)()
    if _libc.ptrace(_PTRACE_GETREGS, tid, None, ctypes.addressof(regs)) == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return [int(regs[_RIP]), *_signal_pcs(pid, int(regs[_RSP]))]


def _signal_pcs(pid: int, sp: int) -> list[int]:
    """The interrupted pc of each signal frame the thread whose stack pointer is ``sp`` will
    return through: frames in the SIGNAL_STACK bytes above ``sp`` (or to the end of that
    mapping). A frame delivered on a signal stack (its ``uc_stack``, just before the
    ``sigcontext``) counts only when ``sp`` is on that stack too: the memory above a stack
    holds other threads' signal stacks, and their old frames. A word that only looks like a
    frame may count too: that costs one more try, never a missed frame."""
    try:
        stack = _read(pid, sp, SIGNAL_STACK)
    except VdsoError:
        return []
    pcs, at = [], stack.find(_SIGCONTEXT_CS)
    while at >= 0:
        if (sp + at) % 8 == 0 and at >= 168:  # uc_stack, 24 bytes before the sigcontext
            ip, = struct.unpack_from("<Q", stack, at - 16)
            ss_sp, ss_flags, ss_size = struct.unpack_from("<QI4xQ", stack, at - 168)
            if ss_flags & _SS_DISABLE or ss_sp <= sp < ss_sp + ss_size:
                pcs.append(ip)
        at = stack.find(_SIGCONTEXT_CS, at + 1)
    return pcs


def _threads(pid: int) -> set[int]:
    try:
        return {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    except OSError:
        raise VdsoError(f"pid {pid}: no such process") from None


@contextmanager
def stopped(pid: int, busy: list[tuple[int, int]] | tuple[()]) -> Iterator[None]:
    """Every thread of ``pid`` stopped under ptrace, none of them at an address in ``busy``
    (``[lo, hi)`` ranges): a stop there is let go and tried again a moment later."""
    for _ in range(RETRIES):
        signals = _stop_all(pid)
        try:
            inside = [t for t in signals if busy and any(
                lo <= pc < hi for pc in _pcs(pid, t) for lo, hi in busy)]
        except OSError as e:
            _let_go(signals)
            raise VdsoError(f"pid {pid}: cannot read a thread's registers: {e.strerror}") \
                from None
        if not inside:
            try:
                yield
            finally:
                _let_go(signals)
            return
        _let_go(signals)
        time.sleep(0.001)
    raise VdsoError(f"pid {pid}: a thread stayed inside the vDSO code to rewrite")


def _stop_all(pid: int) -> dict[int, int]:
    """Seize and stop every thread (new ones too, until none appears): tid -> the signal to
    give back when it is let go (a signal-delivery stop's, else 0)."""
    signals: dict[int, int] = {}
    try:
        while pending := _threads(pid) - set(signals):
            for tid in sorted(pending):
                try:
                    _ptrace(_PTRACE_SEIZE, tid)
                    _ptrace(_PTRACE_INTERRUPT, tid)
                except OSError as e:
                    if e.errno == 3 and not os.path.exists(f"/proc/{pid}/task/{tid}"):
                        signals[tid] = -1  # a thread that ended meanwhile
                        continue
                    raise VdsoError(f"pid {pid}: ptrace denied ({e.strerror})") from None
                _, status = os.waitpid(tid, _WALL)
                if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                    signals[tid] = -1
                    continue
                sig = os.WSTOPSIG(status)
                group = status >> 16 == _EVENT_STOP
                signals[tid] = 0 if group or sig == signal.SIGTRAP else sig
    except BaseException:
        _let_go(signals)
        raise
    return {t: s for t, s in signals.items() if s >= 0}


def _let_go(signals: dict[int, int]) -> None:
    for tid, sig in signals.items():
        if sig >= 0:
            try:
                _ptrace(_PTRACE_DETACH, tid, sig)
            except OSError:  # the thread ended
                _reap(tid)


def _reap(tid: int) -> None:
    """A thread seized here that ended (its process died while stopped) waits for its tracer
    to reap it, and its process's exit waits for that: were it left, the process's parent
    would wait for ever. A second or less: a thread still ending is reaped once it has."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            done, status = os.waitpid(tid, os.WNOHANG | _WALL)
        except ChildProcessError:
            return  # reaped already, or never ours
        if done and not os.WIFSTOPPED(status):
            return
        if done:  # stopped after all: let it go
            with suppress(OSError):
                _ptrace(_PTRACE_DETACH, tid)
            return
        time.sleep(0.001)
