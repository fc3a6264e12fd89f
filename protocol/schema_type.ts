/**
 * The TypeScript type a JSON Schema of protocol/schemas.ts describes, computed by the compiler,
 * and a strict equality of types: together they make `deno check` fail when a schema and its
 * wire.ts type disagree (a field missing, optional on one side only, of another type).
 * Covers the keywords the schemas use: $ref, const, enum, oneOf, anyOf, type (one or a list),
 * properties + required, additionalProperties, items.
 */

/** The value type of schema `S`, resolving `$ref`s of the form `#/components/schemas/N` in `D`. */
export type FromSchema<S, D> = S extends { $ref: `#/components/schemas/${infer N}` }
  ? N extends keyof D ? FromSchema<D[N], D> : never
  : S extends { const: infer C } ? C
  : S extends { enum: readonly (infer E)[] } ? E
  : S extends { oneOf: readonly (infer O)[] } ? FromSchema<O, D>
  : S extends { anyOf: readonly (infer O)[] } ? FromSchema<O, D>
  : S extends { type: readonly (infer T)[] } ? FromType<T, S, D>
  : S extends { type: infer T } ? FromType<T, S, D>
  : unknown;

type FromType<T, S, D> = T extends "string" ? string
  : T extends "integer" | "number" ? number
  : T extends "boolean" ? boolean
  : T extends "null" ? null
  : T extends "array" ? (S extends { items: infer I } ? FromSchema<I, D>[] : unknown[])
  : T extends "object" ? ObjectOf<S, D>
  : never;

type RequiredOf<S> = S extends { required: readonly (infer R)[] } ? R : never;

type ObjectOf<S, D> = S extends { properties: infer P } ? Flat<
    & { -readonly [K in keyof P as K extends RequiredOf<S> ? K : never]-?: FromSchema<P[K], D> }
    & { -readonly [K in keyof P as K extends RequiredOf<S> ? never : K]?: FromSchema<P[K], D> }
  >
  : S extends { additionalProperties: infer A } ? Record<string, FromSchema<A, D>>
  : Record<string, unknown>;

type Flat<T> = { [K in keyof T]: T[K] };

/** `T` with every object level written out (intersections and interfaces become plain types). */
export type Plain<T> = T extends readonly (infer U)[] ? Plain<U>[]
  : T extends object ? { [K in keyof T]: Plain<T[K]> }
  : T;

/** True when A and B are the same type (not merely assignable each way). */
export type Same<A, B> = (<T>() => T extends Plain<A> ? 1 : 2) extends
  (<T>() => T extends Plain<B> ? 1 : 2) ? true : false;
