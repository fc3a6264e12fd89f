/**
 * `deno task build:client [--out DIR]`: the client as an npm-style package in `dist/client/`
 * (or DIR), for Node ≥ 20 and bundlers, plus one file for browsers:
 *
 *   mod.js, *.js, *.d.ts    ES modules and their types, compiled by tsc from clients/ts/
 *   protocol/*.js, *.d.ts   the wire types and helpers the client imports, inside the package
 *   ferry.browser.js        the whole client as one ES module (`deno bundle`)
 *   package.json            `@ferry/client`, its version from clients/ts/deno.json
 *
 * The sources are staged in a temp dir with `../../protocol/` imports rewritten to `./protocol/`,
 * so the package is self-contained; tsc's `rewriteRelativeImportExtensions` turns the `.ts`
 * specifiers into `.js`. The new package replaces the old one only once it is complete.
 */

import ts from "typescript";

const ROOT = new URL("../", import.meta.url);
const CLIENT = new URL("clients/ts/", ROOT);
const PROTOCOL = new URL("protocol/", ROOT);

/** What tsc compiles the client with: what the platforms it targets all have. */
const COMPILER_OPTIONS: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  lib: ["lib.es2022.d.ts", "lib.dom.d.ts", "lib.dom.iterable.d.ts"],
  types: [],
  strict: true,
  noUncheckedIndexedAccess: true,
  noImplicitOverride: true,
  declaration: true,
  allowImportingTsExtensions: true,
  rewriteRelativeImportExtensions: true,
  skipLibCheck: true,
  newLine: ts.NewLineKind.LineFeed,
};

function parseArgs(args: string[]): { out: string } {
  let out = new URL("dist/client", ROOT).pathname;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--out" && args[i + 1]) out = args[++i]!;
    else throw new Error(`usage: deno task build:client [--out DIR] (got "${args[i]}")`);
  }
  return { out: out.replace(/\/+$/, "") };
}

/** The `.ts` files of a directory, tests and declarations left out. */
async function sources(dir: URL): Promise<string[]> {
  const names: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    if (e.isFile && e.name.endsWith(".ts") && !e.name.endsWith(".d.ts")) names.push(e.name);
  }
  return names.sort();
}

/** Copies clients/ts/ and protocol/ into `stage`, with protocol imports pointing inside it. */
async function stageSources(stage: string): Promise<string[]> {
  await Deno.mkdir(`${stage}/protocol`, { recursive: true });
  const files: string[] = [];
  for (const name of await sources(CLIENT)) {
    const text = await Deno.readTextFile(new URL(name, CLIENT));
    await Deno.writeTextFile(
      `${stage}/${name}`,
      text.replaceAll('"../../protocol/', '"./protocol/'),
    );
    files.push(`${stage}/${name}`);
  }
  for (const name of await sources(PROTOCOL)) {
    await Deno.copyFile(new URL(name, PROTOCOL), `${stage}/protocol/${name}`);
    files.push(`${stage}/protocol/${name}`);
  }
  return files;
}

/** Compiles the staged files into `out`; throws with tsc's diagnostics on any error. */
function compile(files: string[], stage: string, out: string): void {
  const program = ts.createProgram(files, { ...COMPILER_OPTIONS, rootDir: stage, outDir: out });
  const result = program.emit();
  const diagnostics = [...ts.getPreEmitDiagnostics(program), ...result.diagnostics];
  if (diagnostics.length) {
    throw new Error(ts.formatDiagnostics(diagnostics, {
      getCanonicalFileName: (f) => f,
      getCurrentDirectory: () => stage,
      getNewLine: () => "\n",
    }));
  }
}

/**
 * Points the `.ts` specifiers tsc leaves in declaration files at the `.d.ts`/`.js` pair, as
 * `rewriteRelativeImportExtensions` does for the JavaScript.
 */
async function rewriteDeclarations(dir: string): Promise<void> {
  for await (const e of Deno.readDir(dir)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) await rewriteDeclarations(path);
    else if (e.name.endsWith(".d.ts")) {
      const text = await Deno.readTextFile(path);
      await Deno.writeTextFile(path, text.replace(/(["'])(\.{1,2}\/[^"']+)\.ts\1/g, "$1$2.js$1"));
    }
  }
}

/** Bundles clients/ts/mod.ts into one ES module for browsers. */
async function bundle(file: string): Promise<void> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["bundle", "--quiet", "--platform", "browser", "--format", "esm", "-o", file, "mod.ts"],
    cwd: CLIENT.pathname,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(`deno bundle failed:\n${new TextDecoder().decode(out.stderr)}`);
  }
}

async function main(): Promise<void> {
  const { out } = parseArgs(Deno.args);
  const meta = JSON.parse(await Deno.readTextFile(new URL("deno.json", CLIENT)));
  const stage = await Deno.makeTempDir({ prefix: "ferry-client-stage-" });
  const next = `${out}.next-${crypto.randomUUID().slice(0, 8)}`;
  try {
    compile(await stageSources(stage), stage, next);
    await rewriteDeclarations(next);
    await bundle(`${next}/ferry.browser.js`);
    const pkg = {
      name: meta.name,
      version: meta.version,
      description: "The TypeScript client of the Ferry message broker",
      type: "module",
      main: "./mod.js",
      types: "./mod.d.ts",
      exports: {
        ".": { types: "./mod.d.ts", default: "./mod.js" },
        "./browser": "./ferry.browser.js",
        "./package.json": "./package.json",
      },
      sideEffects: false,
      engines: { node: ">=20" },
    };
    await Deno.writeTextFile(`${next}/package.json`, JSON.stringify(pkg, null, 2) + "\n");
    await Deno.remove(out, { recursive: true }).catch(() => {});
    await Deno.rename(next, out);
    console.log(`built ${meta.name}@${meta.version} in ${out}`);
  } finally {
    await Deno.remove(stage, { recursive: true }).catch(() => {});
    await Deno.remove(next, { recursive: true }).catch(() => {});
  }
}

await main();
