// Metadata scrubbing of originals (#39), on real photographs given a phone's metadata with exiftool: no GPS,
// serial or owner left (as exiftool reads the result), the orientation and the ICC profile kept, the pixels
// the same, every format; and hostile or cut files never read or written out of bounds (a ScrubError, or a
// file that still decodes to the same pixels).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import sharp from 'sharp';
import { ScrubError, scrubMetadata } from '../src/scrub/index.js';
import { personalTags as personal, photo, readMetadata as exif, withMetadata } from '../../test/support/images.js';

/** A file of `format` from a real photograph, with a phone's metadata (and IPTC places for a JPEG). @param {string} format */
async function phonePhoto(format) {
  const image = sharp(photo('Path', '1280x800')).resize(640);
  const encoded = await (
    format === 'png' ? image.png() : format === 'webp' ? image.webp() : image.jpeg({ quality: 90 })
  )
    .withIccProfile('p3')
    .toBuffer();
  const extension = format === 'jpeg' ? 'jpg' : format;
  const phone = withMetadata(encoded, extension);
  return format === 'jpeg'
    ? withMetadata(phone, extension, [
        '-IPTC:City=Paris',
        '-IPTC:Country-PrimaryLocationName=France',
        '-IPTC:Keywords=tower',
      ])
    : phone;
}

/** Decoded pixels (as stored: no rotation) and their size. @param {Buffer} bytes */
const pixels = (bytes) => sharp(bytes).raw().toBuffer({ resolveWithObject: true });

for (const format of ['jpeg', 'png', 'webp']) {
  test(`${format}: location and device data gone, orientation and profile kept, the same pixels`, async () => {
    const uploaded = await phonePhoto(format);
    assert.ok(personal(exif(uploaded)).length >= 4, `the test file carries ${personal(exif(uploaded))}`);
    const { data, removed } = scrubMetadata(uploaded, format, 'location');
    assert.ok(removed.includes('gps'), `removed ${removed}`);
    const tags = exif(data);
    assert.deepEqual(personal(tags), [], `no GPS, serial, owner or place left (removed ${removed})`);
    assert.equal(tags['IFD0:Orientation'], 6, 'a portrait photograph stays upright');
    assert.equal(tags['IFD0:Make'], 'Apple', 'what does not identify a person stays');
    assert.ok(
      Object.keys(tags).some((name) => name.startsWith('ICC')),
      'the colour profile stays',
    );
    const [before, afterScrub] = [await pixels(uploaded), await pixels(data)];
    assert.deepEqual(afterScrub.info, before.info);
    assert.ok(afterScrub.data.equals(before.data), 'decodes to exactly the same pixels');
  });
}

test('jpeg: the compressed pixels are the uploaded bytes; "none" keeps the file byte for byte; "all" leaves orientation and profile', async () => {
  const uploaded = await phonePhoto('jpeg');
  const scan = (/** @type {Buffer} */ bytes) => bytes.subarray(bytes.indexOf(Buffer.from([0xff, 0xda])));
  const { data } = scrubMetadata(uploaded, 'jpeg', 'location');
  assert.ok(scan(data).equals(scan(uploaded)), 'from the first scan on, byte for byte');
  assert.equal(scrubMetadata(uploaded, 'jpeg', 'none').data, uploaded);
  const all = exif(scrubMetadata(uploaded, 'jpeg', 'all').data);
  const left = Object.keys(all).filter(
    (name) => !/^(ExifTool|System|File|Composite|ICC[-_\w]*|JFIF):|^SourceFile$/.test(name),
  );
  assert.deepEqual(left.sort(), ['IFD0:Orientation'], `left: ${left}`);
  assert.ok(Object.keys(all).some((name) => name.startsWith('ICC')));
});

test('a file without anything to remove is left as it is', async () => {
  const plain = await sharp(photo('Path', '1280x800')).resize(200).jpeg().toBuffer();
  assert.equal(scrubMetadata(plain, 'jpeg', 'location').data, plain);
});

test('hostile and cut files: a ScrubError or the same pixels, never an out-of-bounds read or write', async () => {
  const uploaded = await phonePhoto('jpeg');
  const reference = await pixels(uploaded);
  let seed = 7;
  const random = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed;
  };
  const exifAt = uploaded.indexOf(Buffer.from('Exif\0\0', 'latin1'));
  let refused = 0;
  let scrubbed = 0;
  for (let i = 0; i < 600; i += 1) {
    const hostile = Buffer.from(uploaded);
    if (i % 3 === 0) {
      // cut anywhere in the metadata
      const cut = hostile.subarray(0, 2 + (random() % (exifAt + 4000)));
      try {
        scrubMetadata(cut, 'jpeg', 'location');
        scrubbed += 1;
      } catch (err) {
        assert.ok(err instanceof ScrubError, String(err));
        refused += 1;
      }
      continue;
    }
    // flip bytes inside the EXIF (offsets, counts, types pointing anywhere)
    for (let n = 0; n < 1 + (random() % 8); n += 1) hostile[exifAt + 6 + (random() % 3000)] = random() & 0xff;
    try {
      const { data } = scrubMetadata(hostile, 'jpeg', i % 2 ? 'location' : 'all');
      const after = await pixels(data);
      assert.ok(after.data.equals(reference.data), 'the pixels survive whatever the metadata was');
      scrubbed += 1;
    } catch (err) {
      assert.ok(err instanceof ScrubError, String(/** @type {Error} */ (err)?.stack));
      refused += 1;
    }
  }
  assert.ok(refused > 0 && scrubbed > 0, `${scrubbed} scrubbed, ${refused} refused`);
});
