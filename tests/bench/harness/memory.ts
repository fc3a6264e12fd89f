/**
 * @module Memory of a child process: VmRSS and VmHWM from /proc/<pid>/status, and a full GC
 * forced through the V8 inspector of a broker started with `--inspect`.
 */

/** VmRSS and VmHWM of `pid`, in bytes. */

export async function vmRss(pid: number): Promise<{ rss: number; hwm: number }> {
  const text = await Deno.readTextFile(`/proc/${pid}/status`);
  const kb = (key: string) =>
    Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? NaN);
  return { rss: kb("VmRSS") * 1024, hwm: kb("VmHWM") * 1024 };
}

/** Runtime.getHeapUsage's answer. */
export interface HeapUsage {
  usedSize: number;
  totalSize: number;
  backingStorageSize?: number;
}

/**
 * Forces a full GC in the broker through its V8 inspector and returns the JS heap usage
 * before and after. Bounded by a 30 s timeout.
 */
export async function forceGc(inspector: string): Promise<{ before: HeapUsage; after: HeapUsage }> {
  const ws = new WebSocket(inspector);
  const waiting = new Map<number, (v: unknown) => void>();
  let next = 0;
  ws.onmessage = (e) => {
    const m = JSON.parse(e.data as string) as { id?: number; result?: unknown };
    if (m.id !== undefined) waiting.get(m.id)?.(m.result);
  };
  const call = (method: string) =>
    new Promise<unknown>((res) => {
      const id = ++next;
      waiting.set(id, res);
      ws.send(JSON.stringify({ id, method, params: {} }));
    });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, rej) => {
    timer = setTimeout(() => rej(new Error("inspector did not answer in 30 s")), 30_000);
  });
  try {
    return await Promise.race([
      (async () => {
        await new Promise((res, rej) => {
          ws.onopen = res;
          ws.onerror = () => rej(new Error(`cannot reach the inspector at ${inspector}`));
        });
        const before = await call("Runtime.getHeapUsage") as HeapUsage;
        await call("HeapProfiler.enable");
        await call("HeapProfiler.collectGarbage");
        const after = await call("Runtime.getHeapUsage") as HeapUsage;
        return { before, after };
      })(),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
    ws.close();
  }
}
