// Phone photographs uploaded (#39): the stored original has no GPS, serial or owner, keeps its orientation
// and profile, decodes to the same pixels, is served under the key of the uploaded bytes, and carries the
// record of what was done; UPLOAD_METADATA=none keeps the bytes as they came.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { after, before, test } from 'node:test';
import sharp from 'sharp';
import { keyOf } from '../src/keys.js';
import { FsStore } from '../src/store/fs.js';
import { verifyStored } from '../src/store/record.js';
import { personalTags, photo, readMetadata, withMetadata } from '../../test/support/images.js';
import { metricValue } from '../../test/support/metrics.js';
import { startOrigin, tokenUpload } from './harness.js';

/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let origin;
/** @type {Awaited<ReturnType<typeof startOrigin>>} */
let keeping;

before(async () => {
  [origin, keeping] = await Promise.all([startOrigin(), startOrigin({ UPLOAD_METADATA: 'none' })]);
});
after(() => Promise.all([origin?.stop(), keeping?.stop()]));

/** @param {Awaited<ReturnType<typeof startOrigin>>} target @param {Buffer} bytes @param {string} name */
async function uploadAndFetch(target, bytes, name) {
  const response = await tokenUpload(target.base, bytes, name);
  assert.equal(response.status, 200, await response.clone().text());
  const { url } = /** @type {{ url: string }} */ (await response.json());
  const served = Buffer.from(await (await fetch(url)).arrayBuffer());
  return { url, served, key: new URL(url).pathname.split('/')[1] };
}

for (const [format, extension] of /** @type {const} */ ([
  ['jpeg', 'jpg'],
  ['png', 'png'],
  ['webp', 'webp'],
])) {
  test(`a ${format} from a phone: stored and served without location or device data, upright, the same pixels, under the uploaded bytes' key`, async () => {
    const encoded = await sharp(photo('Path', '1280x800')).resize(800).toFormat(format).withIccProfile('p3').toBuffer();
    const uploaded = withMetadata(encoded, extension);
    assert.ok(personalTags(readMetadata(uploaded)).length >= 4);
    const scrubs = await metricValue(origin.metricsUrl, 'origin_upload_scrubs_total', { result: 'scrubbed' });
    const { served, key } = await uploadAndFetch(origin, uploaded, `phone.${extension}`);
    assert.equal(key, keyOf(uploaded), 'the key of the bytes that were sent');
    const tags = readMetadata(served);
    assert.deepEqual(personalTags(tags), []);
    assert.equal(tags['IFD0:Orientation'], 6);
    assert.ok(
      Object.keys(tags).some((name) => name.startsWith('ICC')),
      'the profile kept',
    );
    const [sent, got] = await Promise.all([uploaded, served].map((bytes) => sharp(bytes).raw().toBuffer()));
    assert.ok(got.equals(sent), 'the same pixels');
    assert.equal(
      (await metricValue(origin.metricsUrl, 'origin_upload_scrubs_total', { result: 'scrubbed' })) - scrubs,
      1,
    );
    // the record beside it: what verifies it now that its bytes no longer make its key
    const store = new FsStore(origin.dataDir);
    const record = await store.record(key);
    assert.equal(record?.scrubbed, 'location');
    assert.equal(record?.uploadSha256, createHash('sha256').update(uploaded).digest('hex'));
    const file = store.pathFor(key);
    assert.equal(await verifyStored(file, key, record), true);
    assert.equal(await verifyStored(file, keyOf(Buffer.from('another')), record), false, 'not under another key');
    assert.equal(
      await verifyStored(file, key, { ...record, storedSha256: '0'.repeat(64) }),
      false,
      'not with a record of other bytes',
    );
  });
}

test('UPLOAD_METADATA=none stores the bytes as they came', async () => {
  const uploaded = withMetadata(await sharp(photo('Path', '1280x800')).resize(300).jpeg().toBuffer(), 'jpg');
  const { served } = await uploadAndFetch(keeping, uploaded, 'kept.jpg');
  assert.ok(served.equals(uploaded));
  assert.ok(personalTags(readMetadata(served)).length > 0);
});

test('a photograph without anything to remove is stored byte for byte, with no record', async () => {
  const plain = await sharp(photo('Path', '1280x800')).resize(300).jpeg().toBuffer();
  const { served, key } = await uploadAndFetch(origin, plain, 'plain.jpg');
  assert.ok(served.equals(plain));
  assert.equal(await new FsStore(origin.dataDir).record(key), null);
  assert.ok(path.isAbsolute(new FsStore(origin.dataDir).pathFor(key)));
});

test('a format whose metadata is not edited in place (TIFF) is stored as a clean re-encode: same pixels, no metadata, counted', async () => {
  const tiff = withMetadata(
    await sharp(photo('Path', '1280x800')).resize(300).tiff({ compression: 'lzw' }).toBuffer(),
    'tif',
    ['-GPSLatitude=48.8583', '-GPSLatitudeRef=N', '-Artist=Jane Doe'],
  );
  assert.ok(personalTags(readMetadata(tiff)).length > 0);
  const before = await metricValue(origin.metricsUrl, 'origin_upload_scrubs_total', { result: 'reencoded' });
  const { served, key } = await uploadAndFetch(origin, tiff, 'scan.tif');
  assert.equal(key, keyOf(tiff));
  assert.deepEqual(personalTags(readMetadata(served)), []);
  const [sent, got] = await Promise.all([tiff, served].map((bytes) => sharp(bytes).raw().toBuffer()));
  assert.ok(got.equals(sent), 'losslessly: the same pixels');
  assert.equal(
    (await metricValue(origin.metricsUrl, 'origin_upload_scrubs_total', { result: 'reencoded' })) - before,
    1,
  );
  assert.equal((await new FsStore(origin.dataDir).record(key))?.scrubbed, 'reencoded');
});
