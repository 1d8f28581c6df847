// The exported bundle in ajv, the most used JavaScript JSON Schema validator, with its strict defaults (draft
// 2020-12 class): every schema compiles, every $defs type compiles, and every fixture is valid or invalid exactly
// as its folder says. tests/test_protocol_node.py runs it after exporting the bundle next to this file.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

import Ajv2020 from "ajv/dist/2020.js";

interface Schema {
  $id: string;
  $defs?: Record<string, unknown>;
}

const bundle = process.argv[2] ?? "bundle";
const warnings: unknown[] = [];
// Strict defaults; only the logger is ours, so that a strict-mode warning fails the test instead of scrolling by.
const ajv = new Ajv2020({ logger: { log: () => undefined, warn: (...m: unknown[]) => warnings.push(m), error: console.error } });

const schemas = readdirSync(join(bundle, "schemas"))
  .filter((name) => name.endsWith(".json"))
  .map((name) => ({ name, schema: JSON.parse(readFileSync(join(bundle, "schemas", name), "utf8")) as Schema }));
assert.ok(schemas.length >= 9, `only ${schemas.length} schemas in the bundle`);

/** The compiled validator of a $defs type: whether a value is valid, and ajv's errors when it is not. */
function validator(ref: string): (value: unknown) => [boolean, string] {
  const validate = ajv.getSchema(ref);
  if (validate === undefined) {
    throw new Error(`${ref} does not compile`);
  }
  return (value) => [validate(value) === true, JSON.stringify(validate.errors)];
}

const home = new Map<string, string>(); // type name -> the $id of a schema that defines it
let types = 0;
for (const { name, schema } of schemas) {
  try {
    ajv.addSchema(schema);
    ajv.compile({ $ref: schema.$id });
  } catch (error) {
    assert.fail(`${name}: ${String(error)}`);
  }
  for (const type of Object.keys(schema.$defs ?? {})) {
    validator(`${schema.$id}#/$defs/${type}`);
    types += 1;
    if (!home.has(type)) {
      home.set(type, schema.$id);
    }
  }
}

let checked = 0;
for (const type of readdirSync(join(bundle, "fixtures"))) {
  const id = home.get(type);
  if (id === undefined) {
    continue; // reported below
  }
  const check = validator(`${id}#/$defs/${type}`);
  for (const expected of ["valid", "invalid"] as const) {
    const folder = join(bundle, "fixtures", type, expected);
    if (!existsSync(folder)) {
      continue;
    }
    for (const file of readdirSync(folder)) {
      const value: unknown = JSON.parse(readFileSync(join(folder, file), "utf8"));
      const [ok, errors] = check(value);
      assert.equal(ok, expected === "valid", `${type}/${expected}/${file}: ${errors}`);
      checked += 1;
    }
  }
}
const unmatched = readdirSync(join(bundle, "fixtures")).filter((type) => !home.has(type));
assert.deepEqual(unmatched, [], "every fixture folder names a type of the bundle");
assert.deepEqual(warnings, [], "ajv's strict mode warned");
console.log(JSON.stringify({ schemas: schemas.length, types, fixtures: checked }));
