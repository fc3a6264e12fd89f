/**
 * The docs as the examples runner reads them: the pages (README.md and every docs/**.md), their
 * fenced blocks with the info string's language and `norun`, the `<!-- docs:test env … -->`
 * settings of a page's broker, its relative links and its headings' anchors (GitHub's rule).
 * How examples are written: docs/testing.md, "Writing docs examples".
 */

/** The repository's root. */
export const ROOT = new URL("../../", import.meta.url).pathname;

/** What a block is run as, from the first word of its info string. */
export type Lang = "sh" | "ts" | "go" | "output" | "other";

const LANGS: Record<string, Lang> = {
  sh: "sh",
  bash: "sh",
  shell: "sh",
  ts: "ts",
  typescript: "ts",
  go: "go",
  output: "output",
};

/** One fenced block of a page. */
export interface Block {
  lang: Lang;
  /** Its info string says `norun`: shown, not run. */
  norun: boolean;
  /** The 1-based line of the page its first code line is on. */
  line: number;
  /** Its lines, without the fences and the list indent. */
  lines: string[];
}

/** A page: its path from the root, blocks, broker settings, links and anchors. */
export interface Page {
  path: string;
  text: string;
  blocks: Block[];
  /** From `<!-- docs:test env NAME=value … -->`: the environment of the page's broker. */
  env: Record<string, string>;
}

/** The fenced blocks of `text`, in order. Indented fences (in list items) count too. */
export function blocksOf(text: string): Block[] {
  const lines = text.split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^( *)(`{3,}|~{3,})\s*([^`]*)$/.exec(lines[i]!);
    if (!open) continue;
    const [, indent, fence, info] = open;
    const words = info!.trim().split(/\s+/).filter(Boolean);
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const line = lines[j]!;
      if (line.trim().startsWith(fence!) && line.trim().replace(/[`~]/g, "") === "") break;
      body.push(line.startsWith(indent!) ? line.slice(indent!.length) : line.trimStart());
    }
    blocks.push({
      lang: LANGS[words[0] ?? ""] ?? "other",
      norun: words.includes("norun"),
      line: i + 2,
      lines: body,
    });
    i = j;
  }
  return blocks;
}

/** The page's broker environment from its `<!-- docs:test env … -->` comments (not in code). */
export function envOf(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const m of prose(text).join("\n").matchAll(/<!--\s*docs:test\s+env\s+([\s\S]*?)-->/g)) {
    for (const word of m[1]!.trim().split(/\s+/)) {
      const eq = word.indexOf("=");
      if (eq > 0) env[word.slice(0, eq)] = word.slice(eq + 1);
    }
  }
  return env;
}

/** Text outside fenced blocks and inline code, where links and headings live. */
function prose(text: string): string[] {
  const out: string[] = [];
  let fence: string | undefined;
  for (const line of text.split("\n")) {
    const m = /^ *(`{3,}|~{3,})/.exec(line);
    if (fence) {
      if (m && line.trim().startsWith(fence)) fence = undefined;
      out.push("");
    } else if (m) {
      fence = m[1];
      out.push("");
    } else out.push(line);
  }
  return out;
}

/** GitHub's anchor of a heading: lower case, formatting and punctuation dropped, spaces to `-`. */
export function slug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1") // links and images keep their text
    .replace(/<[^>]+>/g, "")
    .replace(/[`*]/g, "")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-");
}

/** The anchors of a page's headings, with GitHub's `-1`, `-2` for repeats. */
export function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of prose(text)) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n ? `${base}-${n}` : base);
  }
  for (const m of text.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) anchors.add(m[1]!);
  return anchors;
}

/** A link of a page that stays inside the repository: its line and target. */
export interface Link {
  line: number;
  target: string;
}

/** The relative links and images of a page's prose (not those with a scheme or `//`). */
export function linksOf(text: string): Link[] {
  const links: Link[] = [];
  prose(text).forEach((raw, i) => {
    const line = raw.replace(/`[^`]*`/g, "");
    for (const m of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//")) continue;
      links.push({ line: i + 1, target });
    }
  });
  return links;
}

/** README.md and every Markdown file under docs/, sorted. */
export async function pagePaths(): Promise<string[]> {
  const paths = ["README.md"];
  const walk = async (dir: string) => {
    for await (const e of Deno.readDir(ROOT + dir)) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory) await walk(path);
      else if (e.name.endsWith(".md")) paths.push(path);
    }
  };
  await walk("docs");
  return paths.sort((
    a,
    b,
  ) => (a === "README.md" ? -1 : b === "README.md" ? 1 : a.localeCompare(b)));
}

/** A page read from disk. */
export async function readPage(path: string): Promise<Page> {
  const text = await Deno.readTextFile(ROOT + path);
  return { path, text, blocks: blocksOf(text), env: envOf(text) };
}
