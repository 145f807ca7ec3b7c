"""Feeding the GPUs: chunks sized by free memory, host threads with streams, all devices.

The valid datasets are split over the GPUs by cost (observations x starts,
greedy longest-first), each GPU's share is dealt the same way into chunks of
equal cost (so that no stream is left with all the long fits), and chunks are
cut further where their data and fit arrays would not fit a share of the
device's free memory.  Within a chunk, datasets run largest first (long fits
start early; neighbouring fits in a block cost about the same).
The starts are drawn first, on every core, and the calling thread launches
each GPU's first chunk itself.  Each GPU gets its share of
``Tuning.cuda_host_threads`` host threads; each takes chunks from its
device's queue, packs them (gathers their datasets and computes the
features), and keeps ``Tuning.cuda_chunks_in_flight`` launched at once on
streams of its own: the next chunk is packed and copied while the GPU runs
the previous one.  Once the first chunks are launched, the calling thread
builds the tables that need the starts only.
A fit depends only on its own inputs, so the results are the same whatever
the chunking, the number of threads or the number of GPUs.
"""

from __future__ import annotations

import heapq
import math
import queue
import threading
from dataclasses import dataclass

import numpy as np

from . import bulk
from .compat import SIMULATED, cuda


@dataclass
class Chunk:
    """A piece of the batch small enough for one launch.

    Attributes
    ----------
    datasets : ndarray of shape (n_ds,)
        Valid-dataset indices of the job.
    fits : ndarray of shape (n_fits,)
        Rows of the job's fit arrays, grouped by dataset in ``datasets`` order.
    fit_ds : ndarray of shape (n_fits,)
        Position in ``datasets`` of each fit's dataset.
    data64, offsets, const
        The chunk's datasets packed as the kernel wants them (filled by
        :func:`pack` from the model's ``kernel_data``; float arrays in
        float64, the engine makes the compute-dtype copies).
    longest : int
        Values in the chunk's longest unit (sizes the models' per-lane buffers).
    """

    datasets: np.ndarray
    fits: np.ndarray
    fit_ds: np.ndarray
    data64: tuple | None = None
    offsets: np.ndarray | None = None
    const: np.ndarray | None = None
    longest: int = 0


def _fit_ranges(job) -> tuple[np.ndarray, np.ndarray]:
    """First fit row and number of fits of every valid dataset (fits are dataset-major)."""
    n_valid = job.data.n_datasets
    counts = np.bincount(job.fit_ds, minlength=n_valid)
    first = np.zeros(n_valid, dtype=np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    return first, counts


def balance(cost: np.ndarray, order: np.ndarray, n_parts: int) -> list[np.ndarray]:
    """Deal datasets into parts of equal cost, longest first to the least loaded (LPT).

    Used to split a batch over GPUs and a GPU's share into chunks.  Returns one
    array of dataset indices per part, each in ``order``'s order.
    """
    if n_parts == 1:
        return [order]
    heap = [(0.0, k) for k in range(n_parts)]  # (load, part): the least loaded, lowest first
    owner = np.empty(len(cost), dtype=np.int64)
    for d in order[np.argsort(-cost[order], kind="stable")].tolist():
        load, k = heapq.heappop(heap)
        owner[d] = k
        heapq.heappush(heap, (load + float(cost[d]), k))
    return [order[owner[order] == k] for k in range(n_parts)]


def plan_chunks(job, datasets: np.ndarray, budget: int, max_fits: int,
                ranges: tuple[np.ndarray, np.ndarray] | None = None) -> list[Chunk]:
    """Cut a device's datasets into chunks of at most ``budget`` bytes and ``max_fits`` fits.

    ``ranges`` is ``_fit_ranges(job)``, if the caller has it.
    """
    first, counts = _fit_ranges(job) if ranges is None else ranges
    item = job.model.bytes_per_value(job.dtype)  # bytes of batch data per value
    # params, status, n_iter, loglik, fit_ds; the lanes' buffers (sized by the batch's longest unit)
    per_fit = (job.params.shape[1] * 8 + 32 + bulk.lanes_per_fit(job.tol, job.dtype, job.model)
               * job.model.sizes().buf_per_len * job.data.longest_unit() * 8)
    sizes = job.data.dataset_sizes()
    n_obs = sizes[datasets]
    n_fits = counts[datasets]
    if (n_obs * item + 16 + n_fits * per_fit).sum() <= budget and n_fits.sum() <= max_fits:
        # All in one chunk (the common case), as the loop below would make it.
        start = np.repeat(first[datasets] - np.cumsum(n_fits) + n_fits, n_fits)
        fits = start + np.arange(n_fits.sum())
        return [Chunk(datasets.astype(np.int64), fits, np.repeat(np.arange(len(datasets)), n_fits))]
    chunks: list[Chunk] = []
    ds_acc: list[int] = []
    fits_acc: list[np.ndarray] = []
    used = n_fits = 0

    def close() -> None:
        nonlocal used, n_fits
        if fits_acc:
            fits = np.concatenate(fits_acc)
            pos = np.repeat(np.arange(len(ds_acc)), [len(f) for f in fits_acc])
            chunks.append(Chunk(np.array(ds_acc, dtype=np.int64), fits, pos))
        ds_acc.clear()
        fits_acc.clear()
        used = n_fits = 0

    for d in datasets:
        n_obs = int(sizes[d])
        data_bytes = n_obs * item + 16
        if data_bytes + per_fit > budget:
            raise ValueError(
                f"a dataset of {n_obs} values needs {data_bytes + per_fit} bytes of GPU memory "
                f"but the budget per chunk is {budget}; fit it with backend='cpu'."
            )
        todo = np.arange(first[d], first[d] + counts[d])
        while len(todo):
            room = min((budget - used - data_bytes) // per_fit, max_fits - n_fits)
            if room < 1:
                close()
                continue
            take, todo = todo[:room], todo[room:]
            ds_acc.append(int(d))
            fits_acc.append(take)
            used += data_bytes + len(take) * per_fit
            n_fits += len(take)
    close()
    return chunks


def pack(job, chunk: Chunk) -> Chunk:
    """Gather the chunk's datasets and make the model's batch arrays of them (host side),
    or take them from the data's ``kernel_cache`` (a fit's chunk of every dataset, for its
    standard errors: kept only then, whose next job's one chunk it will be)."""
    cache = job.data.kernel_cache
    if len(chunk.datasets) < job.data.n_datasets:
        cache = None
    key = (job.model.key, chunk.datasets.tobytes())
    if cache is not None and key in cache:
        chunk.data64, chunk.offsets, chunk.const, chunk.longest = cache[key]
        return chunk
    part = job.data.take(chunk.datasets)
    if job.model.unit_items:
        # A fit's lanes take its units in turn, waiting for each other at the end of each:
        # units of like length side by side (the issue-13 HMM batch, lengths 50-500: 1.16x
        # the fits/s on an H200).  The sums over units change order only.
        part = part.units_by_length()
    chunk.data64, chunk.offsets, chunk.const = job.model.kernel_data(part)
    chunk.longest = part.longest_unit()
    if cache is not None:
        cache[key] = (chunk.data64, chunk.offsets, chunk.const, chunk.longest)
    return chunk


def devices(tuning) -> list[int]:
    """The GPU ids to run on: ``tuning.cuda_devices`` (``fit(devices=...)``), checked against
    the GPUs this process sees, or every one."""
    n = len(cuda.gpus)
    if tuning.cuda_devices is None:
        return list(range(n))
    bad = [d for d in tuning.cuda_devices if not 0 <= d < n]
    if bad:
        raise ValueError(f"devices = {list(tuning.cuda_devices)}: GPU id(s) {bad} not found; "
                         f"this process sees {n} GPU(s), ids 0..{n - 1} "
                         "(CUDA_VISIBLE_DEVICES renumbers them).")
    return list(tuning.cuda_devices)


def _budget(n_in_flight: int, tuning) -> int:
    if tuning.cuda_memory_budget is not None:
        return int(tuning.cuda_memory_budget)
    free, _total = cuda.current_context().get_memory_info()
    free = min(free, 1 << 50)  # the simulator reports infinite memory
    return int(free * tuning.cuda_memory_fraction / n_in_flight)


def run_fits(job, progress, on_starts=None) -> None:
    """Run every fit of a job on all GPUs, in place.

    The starts are drawn first, on every core.  ``on_starts()``, if given,
    then runs in the calling thread while the GPUs work, once the host
    threads have launched their first chunks.
    """
    run_jobs([job], progress, on_starts)


def run_jobs(jobs: list, progress, on_starts=None) -> None:
    """Run every fit of several jobs on all GPUs in one run, in place (:func:`run_fits`).

    A grid of model sizes (``fit(n_components=[1, ..., 6])``) is a job per size on the same
    data, each with its own compiled kernel: each job's chunks are planned as if it ran
    alone, and every chunk of every job goes to the same host threads and streams, the
    costliest job's first, so that one job's kernels run while the next job's chunks are
    packed and launched (one after the other, each size's last chunks would leave the GPU
    idle while the next size's first is packed).  The jobs share the tuning of the first.
    """
    simulated = SIMULATED
    tuning = jobs[0].tuning
    gpus = devices(tuning)  # (checked under the simulator too, which has one)
    if simulated:
        gpus = gpus[:1]
    # The simulator cannot run two kernels at once: one stream, in this thread.
    n_threads = 1 if simulated else max(1, tuning.cuda_host_threads // len(gpus))  # per GPU
    watching = progress.active

    def chunks_of(job, part: np.ndarray, cost: np.ndarray, ranges) -> list[Chunk]:
        counts = ranges[1]
        n_fits = int(counts[part].sum())
        n_chunks = min(len(part), max(
            math.ceil(n_fits / tuning.cuda_chunk_fits),
            min(n_threads * tuning.cuda_chunks_per_stream, n_fits // tuning.cuda_min_chunk_fits),
        ))
        budget = _budget(n_threads * tuning.cuda_chunks_in_flight, tuning)
        return [c for group in balance(cost, part, max(n_chunks, 1))
                for c in plan_chunks(job, group, budget, tuning.cuda_chunk_fits, ranges)]

    lock = threading.Lock()
    errors: list[BaseException] = []
    launched = 0
    first_round = threading.Event()  # on_starts' pandas work holds the GIL: launch first

    def count_launch() -> None:
        nonlocal launched
        with lock:
            launched += 1
            if launched >= first_launches:
                first_round.set()

    def report(n: int) -> None:
        with lock:
            progress(n)

    def finish(job, run) -> None:
        told = [0]

        def watch(done: int) -> None:
            if done > told[0]:
                report(done - told[0])
                told[0] = done

        bulk.finish(job, run, watch if watching else None)
        report(len(run.chunk.fits) - told[0])

    def worker(dev: int, work: queue.Queue, running=None) -> None:
        # Pack a chunk and launch it, then wait for the previous one: the host
        # prepares the next chunk while the GPU runs this one.
        try:
            with cuda.gpus[dev]:
                streams = [cuda.stream() for _ in range(tuning.cuda_chunks_in_flight)]
                n = 0
                while True:
                    started = None
                    item = None if errors else _next(work)
                    if item is not None:
                        job, chunk = item
                        started = (job, bulk.launch(job, pack(job, chunk),
                                                    streams[n % len(streams)]))
                        n += 1  # the streams in turn
                        count_launch()
                    if running is not None:
                        finish(*running)
                    if started is None:
                        return
                    running = started
        except BaseException as err:  # re-raised in the calling thread
            errors.append(err)
            first_round.set()

    # Each device's (job, chunk) pairs in launch order: the costliest job's chunks first.
    work_of: dict = {dev: [] for dev in gpus}
    costs = []
    for job in jobs:
        first, counts = _fit_ranges(job)
        lens = job.data.dataset_sizes()
        costs.append(float((lens * counts).sum()) * job.params.shape[1])
    for k in np.argsort(-np.array(costs), kind="stable"):
        job = jobs[k]
        first, counts = _fit_ranges(job)
        lens = job.data.dataset_sizes()
        cost = lens * counts.astype(np.float64)
        order = np.arange(len(lens))
        if tuning.cuda_group_by_size:
            order = order[np.argsort(-lens, kind="stable")]
        for dev, part in zip(gpus, balance(cost, order, len(gpus)), strict=True):
            if len(part):
                with cuda.gpus[dev]:
                    work_of[dev] += [(job, c) for c in chunks_of(job, part, cost,
                                                                 (first, counts))]
    plans = [(dev, items, min(n_threads, len(items))) for dev, items in work_of.items()
             if items]
    # on_starts waits until every host thread has launched its first chunks
    first_launches = sum(min(n * tuning.cuda_chunks_in_flight, len(c)) for _, c, n in plans)
    for job in jobs:
        job.draw_starts()
    threads = []
    try:
        if simulated:  # one stream, in this thread
            for dev, items, _ in plans:
                worker(dev, _queue(items))
        else:
            # This thread launches each GPU's first chunk itself, one GPU
            # after the other, then starts the workers: a worker started first
            # would hold the GIL while the next GPU waits for its first launch.
            todo = []
            for dev, items, n_dev_threads in plans:
                job, chunk = items[0]
                with cuda.gpus[dev]:
                    opening = (job, bulk.launch(job, pack(job, chunk), cuda.stream()))
                count_launch()
                work = _queue(items[1:])
                todo += [(dev, work, opening if k == 0 else None) for k in range(n_dev_threads)]
            for args in todo:
                threads.append(threading.Thread(target=worker, args=args, daemon=True))
                threads[-1].start()
        if on_starts is not None:
            first_round.wait()
            on_starts()
    finally:
        for t in threads:
            t.join()
    if errors:
        raise errors[0]


def _queue(items: list) -> queue.Queue:
    work: queue.Queue = queue.Queue()
    for item in items:
        work.put(item)
    return work


def _next(work: queue.Queue) -> tuple | None:
    try:
        return work.get_nowait()
    except queue.Empty:
        return None
