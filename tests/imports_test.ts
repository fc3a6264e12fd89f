/**
 * The import graph of every project module, as `deno info --json` resolves it: no cycles, lib/
 * depends on nothing outside itself, net/ only on lib/, clients/ts/ on nothing but protocol/ and
 * no platform API, and nothing imports the entry point.
 */

import { assertEquals } from "./_support/assert.ts";

const ROOT = new URL("../", import.meta.url);
/** Directories that hold no project modules. */
const SKIP = new Set(["node_modules", "data", "dist"]);

/** Every `.ts` file of the project, as a path from the root. */
async function projectFiles(dir = "", out: string[] = []): Promise<string[]> {
  for await (const e of Deno.readDir(new URL(dir || ".", ROOT))) {
    const path = dir + e.name;
    if (e.isDirectory && !e.name.startsWith(".") && !SKIP.has(e.name)) {
      await projectFiles(`${path}/`, out);
    } else if (e.isFile && e.name.endsWith(".ts")) {
      out.push(path);
    }
  }
  return out.sort();
}

/** path → the project paths it imports (values and types alike), from one `deno info` run. */
async function importGraph(): Promise<Map<string, Set<string>>> {
  const files = await projectFiles();
  const root = files.map((f) => `import "${new URL(f, ROOT).href}";`).join("\n");
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", `data:application/typescript;base64,${btoa(root)}`],
    cwd: ROOT.pathname,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(`deno info failed: ${new TextDecoder().decode(out.stderr)}`);
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    modules: {
      specifier: string;
      dependencies?: { code?: { specifier?: string }; type?: { specifier?: string } }[];
    }[];
  };
  const local = (specifier: string | undefined) =>
    specifier?.startsWith(ROOT.href) && !specifier.includes("/node_modules/")
      ? specifier.slice(ROOT.href.length)
      : undefined;
  const graph = new Map<string, Set<string>>(files.map((f) => [f, new Set()]));
  for (const m of info.modules) {
    const from = local(m.specifier);
    if (!from) continue;
    for (const d of m.dependencies ?? []) {
      for (const to of [local(d.code?.specifier), local(d.type?.specifier)]) {
        if (to) graph.get(from)?.add(to) ?? graph.set(from, new Set([to]));
      }
    }
  }
  return graph;
}

/** The strongly connected components of more than one module, or of one importing itself. */
function cycles(graph: Map<string, Set<string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (stack.includes(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)?.has(v)) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

const graph = await importGraph();

Deno.test("project modules import each other without cycles, type imports included", () => {
  assertEquals(cycles(graph).map((c) => c.join(" ↔ ")), [], "import cycles");
});

Deno.test("lib/ imports only lib/ and protocol/: no routes/, runtime.ts or tests/", () => {
  const outside = [...graph].flatMap(([from, tos]) =>
    from.startsWith("lib/")
      ? [...tos].filter((to) => !to.startsWith("lib/") && !to.startsWith("protocol/"))
        .map((to) => `${from} → ${to}`)
      : []
  );
  assertEquals(outside, [], "lib/ imports from outside lib/ and protocol/");
});

/**
 * The lib modules routes/ may import: lib/api.ts (the broker as routes see it, with every shape
 * and helper they use) and leaf modules that hold no state.
 * A route that needs more of the broker asks for a verb in lib/api.ts, not for a new module here.
 */
const ROUTES_MAY_IMPORT = new Set([
  "lib/api.ts",
  "lib/errors.ts",
  "lib/config.ts",
  "lib/names.ts",
  "lib/log.ts",
  "lib/auth.ts",
  "lib/duration.ts",
  "lib/bytes.ts",
]);

Deno.test("routes/ imports lib/ only through the modules its list allows, and no storage", () => {
  const outside = [...graph].flatMap(([from, tos]) =>
    from.startsWith("routes/")
      ? [...tos].filter((to) => to.startsWith("lib/") && !ROUTES_MAY_IMPORT.has(to))
        .map((to) => `${from} → ${to}`)
      : []
  );
  assertEquals(outside, [], "routes/ imports lib modules outside ROUTES_MAY_IMPORT");
});

Deno.test("net/ imports only net/, lib/ and protocol/: what Ferry dials knows no HTTP routes", () => {
  const outside = [...graph].flatMap(([from, tos]) =>
    from.startsWith("net/")
      ? [...tos].filter((to) => !/^(net|lib|protocol)\//.test(to)).map((to) => `${from} → ${to}`)
      : []
  );
  assertEquals(outside, [], "net/ imports from outside net/, lib/ and protocol/");
});

Deno.test("protocol/ imports only protocol/, and no Deno or Node API", async () => {
  const outside = [...graph].flatMap(([from, tos]) =>
    from.startsWith("protocol/")
      ? [...tos].filter((to) => !to.startsWith("protocol/")).map((to) => `${from} → ${to}`)
      : []
  );
  assertEquals(outside, [], "protocol/ imports from outside protocol/");
  const platform: string[] = [];
  for (const from of graph.keys()) {
    if (!from.startsWith("protocol/")) continue;
    const source = await Deno.readTextFile(new URL(from, ROOT));
    if (/\bDeno\.|from\s+["'](node|npm|jsr):/.test(source)) platform.push(from);
  }
  assertEquals(platform, [], "protocol/ modules using Deno, Node or packages");
});

Deno.test("clients/ts/ imports only clients/ts/ and protocol/, and no Deno or Node API: it runs in browsers", async () => {
  const outside = [...graph].flatMap(([from, tos]) =>
    from.startsWith("clients/ts/")
      ? [...tos].filter((to) => !to.startsWith("clients/ts/") && !to.startsWith("protocol/"))
        .map((to) => `${from} → ${to}`)
      : []
  );
  assertEquals(outside, [], "clients/ts/ imports from outside clients/ts/ and protocol/");
  const platform: string[] = [];
  for (const from of graph.keys()) {
    if (!from.startsWith("clients/ts/")) continue;
    const source = await Deno.readTextFile(new URL(from, ROOT));
    if (/\bDeno\.|\bprocess\.|\bBuffer\b|from\s+["'](node|npm|jsr):/.test(source)) {
      platform.push(from);
    }
  }
  assertEquals(platform, [], "clients/ts/ modules using Deno, Node or packages");
});

Deno.test("nothing imports main.ts: it is the entry point, and runtime.ts is what others import", () => {
  const importers = [...graph].filter(([, tos]) => tos.has("main.ts")).map(([from]) => from);
  assertEquals(importers, [], "modules importing main.ts");
});
