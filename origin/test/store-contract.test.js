// The fs store keeps the Store contract (the S3 store's run is in test/s3.test.js).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { FsStore } from '../src/store/fs.js';
import { checkStoreContract } from './store-contract.js';

test('the fs store keeps the Store contract: put, stat, record, remove', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'store-contract-'));
  try {
    const store = new FsStore(dir);
    await store.init();
    await checkStoreContract(store);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
