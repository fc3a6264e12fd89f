/**
 * The accepted name a misspelt one was meant to be, for the "did you mean" of a refusal: an
 * unknown query parameter or body field (routes/accepts.ts), an unknown setting (lib/config.ts).
 */

/**
 * The one name of `names` a typo away from `name` (one edit, two for names of five characters
 * or more; case aside), or undefined when none is, or two are equally close.
 */
export function closestName(name: string, names: Iterable<string>): string | undefined {
  if (name.length > 64) return undefined;
  const given = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  let tie = false;
  for (const n of names) {
    const d = distance(given, n.toLowerCase());
    if (d < bestDistance) [best, bestDistance, tie] = [n, d, false];
    else if (d === bestDistance) tie = true;
  }
  if (best === undefined || tie) return undefined;
  const limit = Math.min(given.length, best.length) >= 5 ? 2 : 1;
  return bestDistance <= limit ? best : undefined;
}

/** Edits (insert, delete, replace, swap two neighbours) from `a` to `b`. */
function distance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row = rows[i] = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row[j] = j;
        continue;
      }
      const up = rows[i - 1]!;
      let d = Math.min(up[j]! + 1, row[j - 1]! + 1, up[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      }
      row[j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}
