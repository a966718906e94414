// The Store contract (origin/src/store/index.js) as assertions, run against every store: the fs store here
// (store-contract.test.js), the S3 store against the stack's versitygw (test/s3.test.js).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import { keyOf } from '../src/keys.js';

/**
 * put, stat, record and remove as a caller sees them. @param {import('../src/store/index.js').Store} store
 */
export async function checkStoreContract(store) {
  const bytes = randomBytes(4096);
  const key = keyOf(bytes);
  assert.equal(await store.stat(key), null, 'a key never put: null');
  assert.equal(await store.record(key), null);

  const first = store.tempPath();
  assert.notEqual(store.tempPath(), first, 'every temp path is fresh');
  await fs.writeFile(first, bytes);
  /** @type {import('../src/store/record.js').StoredRecord} */
  const record = {
    key,
    scrubbed: 'location',
    uploadSha256: 'a'.repeat(64),
    storedSha256: 'b'.repeat(64),
    removed: ['GPS'],
  };
  await store.put(key, first, record);
  const found = await store.stat(key);
  assert.ok(found, 'served once put resolved');
  assert.equal(found.size, bytes.length);
  assert.ok((await fs.readFile(found.path)).equals(bytes), 'the same bytes');
  assert.deepEqual(await store.record(key), record, 'the record kept with it');

  // content-addressed: the same bytes again are no error, and change nothing
  const again = store.tempPath();
  await fs.writeFile(again, bytes);
  await store.put(key, again);
  assert.ok((await fs.readFile(/** @type {{ path: string }} */ (await store.stat(key)).path)).equals(bytes));

  await store.remove(key);
  assert.equal(await store.stat(key), null, 'removed: null');
  assert.equal(await store.record(key), null, 'its record gone too');
  assert.equal(typeof store.copies, 'boolean');
}
