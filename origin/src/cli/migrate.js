// origin-migrate-store [--from DATA_DIR] [--concurrency N]: copies an `fs` store's uploads (DATA_DIR/uploads)
// into the S3 bucket of the S3_* settings. Every file's bytes are checked against its key first, or a
// scrubbed upload's against the record beside it (store/record.js; a damaged file is reported, never copied); an object already in the bucket with the file's size is not written
// again, so the command is idempotent and a run cut short is resumed by running it again.
import '../../../lib/src/node-version.js';
import fs from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { isUploadKey, loadConfig } from '@stack/lib';
import { settings } from '../config.js';
import { runBatch } from './batch.js';
import { verifyStored } from '../store/record.js';
import { bucketProblem, objectSize, putObject, s3Client } from '../store/s3.js';

/** @typedef {'copied' | 'present' | 'damaged' | 'failed'} Outcome */

/** Every upload file under an fs store's uploads/ (sharded two levels deep). @param {string} dir */
export async function* uploadFiles(dir) {
  const root = path.join(dir, 'uploads');
  for (const entry of await fs.readdir(root, { recursive: true, withFileTypes: true })) {
    if (entry.isFile() && isUploadKey(entry.name)) yield path.join(entry.parentPath, entry.name);
  }
}

/** The record an fs store keeps beside an upload (a scrubbed one), or null. @param {string} file */
async function readRecord(file) {
  try {
    return JSON.parse(await fs.readFile(`${file}.json`, 'utf8'));
  } catch {
    return null;
  }
}

/**
 * One file: checked, then copied unless the bucket has it already.
 * @param {import('@aws-sdk/client-s3').S3Client} client @param {import('../store/s3.js').S3Settings} config
 * @param {string} file @returns {Promise<Outcome>}
 */
async function migrateFile(client, config, file) {
  const key = path.basename(file);
  const record = await readRecord(file);
  if (!(await verifyStored(file, key, record))) return 'damaged';
  const { size } = await fs.stat(file);
  if ((await objectSize(client, config, key)) === size) return 'present';
  await putObject(client, config, key, file, record);
  return 'copied';
}

/**
 * Copies every upload of `from` into the bucket, `concurrency` at a time.
 * @param {{ config: import('../store/s3.js').S3Settings, from: string, concurrency: number, log?: (line: string) => void }} options
 */
export async function migrate({ config, from, concurrency, log = (line) => process.stderr.write(`${line}\n`) }) {
  const client = s3Client(config);
  const problem = await bucketProblem(client, config);
  if (problem) throw new Error(problem);
  const files = [];
  for await (const file of uploadFiles(from)) files.push(file);
  const result = await runBatch({
    items: files,
    concurrency,
    outcomes: ['copied', 'present', 'damaged'],
    name: (file) => path.basename(file),
    log,
    work: async (file) => {
      const outcome = await migrateFile(client, config, file);
      if (outcome === 'damaged') log(`\n${file}: its bytes do not make its key: not copied`);
      return outcome;
    },
  });
  client.destroy();
  return result;
}

async function main() {
  const { values } = parseArgs({
    options: { from: { type: 'string' }, concurrency: { type: 'string', default: '8' } },
  });
  const config = loadConfig(settings);
  const from = path.resolve(values.from || config.DATA_DIR);
  process.stderr.write(
    `copying the uploads of ${from} into bucket "${config.S3_BUCKET}" at ${config.S3_ENDPOINT || `AWS S3 (${config.S3_REGION})`}\n`,
  );
  const result = await migrate({
    config: /** @type {import('../store/s3.js').S3Settings} */ (config),
    from,
    concurrency: Number(values.concurrency),
  });
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.stderr.write(
    `${result.total} uploads: ${result.copied} copied, ${result.present} already in the bucket, ${result.damaged} damaged (not copied), ${result.failed} failed\n`,
  );
  process.exitCode = result.failed || result.damaged ? 1 : 0;
}

if (import.meta.main) {
  main().catch((err) => {
    process.stderr.write(`migrate-store: ${err.message}\n`);
    process.exit(2);
  });
}
