import { assertEquals } from "../_support/assert.ts";
import { parseSearch, Query } from "../../routes/http.ts";

Deno.test("parseSearch() reads each field as URLSearchParams.get does, the first of a name winning", () => {
  const cases = [
    "",
    "limit=10&timeout=5s",
    "a=1&a=2",
    "flag&x=",
    "&&a=1&",
    "=x&b",
    "a=b=c",
    "x=%20y&x=z",
    "x=a+b",
    "k=%zz&j=%E2%82%AC",
    "na%6De=v",
  ];
  for (const search of cases) {
    const usp = new URLSearchParams(search);
    const got = parseSearch(search);
    for (const name of new Set([...usp.keys(), "missing"])) {
      assertEquals(got.get(name) ?? null, usp.get(name), `${name} of "${search}"`);
    }
    assertEquals(got.size, new Set(usp.keys()).size, search);
  }
});

Deno.test("Query reads typed fields and an empty search as absent", () => {
  const q = new Query("limit=7&auto_ack=true&timeout=250ms");
  assertEquals(q.int("limit", 1, 1, 100), 7);
  assertEquals(q.bool("auto_ack"), true);
  assertEquals(q.duration("timeout", 60_000), 250);
  assertEquals(q.str("group"), undefined);
  assertEquals(new Query("").str("limit"), undefined);
});
