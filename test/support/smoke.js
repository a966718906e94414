// What a newcomer does first with a stack, through its public edge only: an upload, a resized variant, a
// phone's HEIC upload and its variant, an avatar redirect and a signed purge of it. The compose test and the
// fresh-machine stage both run it.
import assert from 'node:assert/strict';
import { base58Url } from '@stack/lib';
import { sign } from '../../purge-service/src/signature.js';
import fs from 'node:fs';
import { decode, solid } from './images.js';
import { waitFor } from './ports.js';
import { tokenUpload } from './upload.js';

/**
 * @param {string} base the edge, e.g. http://127.0.0.1:8080
 * @param {{ uploadToken: string, hmacKey: string, setAvatar: (account: string, url: string) => Promise<void> | void, color?: string }} how
 *   setAvatar: point the account's avatar at a URL (the resolver's admin API is not on the public path);
 *   color: the uploaded picture's (another than the last run's: uploads are named by their content, and the
 *   avatar must change)
 */
export async function smoke(base, { uploadToken, hmacKey, setAvatar, color }) {
  const original = await solid(640, 480, 'png', color);
  const uploaded = await tokenUpload(base, original, 'photo.png', uploadToken);
  assert.equal(uploaded.status, 200, await uploaded.clone().text());
  const { url } = /** @type {{ url: string }} */ (await uploaded.json());
  const key = new URL(url).pathname;

  const back = await fetch(`${base}${key}`);
  assert.equal(back.status, 200);
  assert.deepEqual(Buffer.from(await back.arrayBuffer()), original, 'the upload served byte for byte');

  const resized = await fetch(`${base}/p/${base58Url.encode(url)}?width=100`);
  assert.equal(resized.status, 200);
  const pixels = await decode(Buffer.from(await resized.arrayBuffer()));
  assert.deepEqual([pixels.width, pixels.height], [100, 75]);

  // an iPhone's format: accepted, and a JPEG variant of the right size made from it. phone.heic is the
  // wallpaper Path (plasma-workspace-wallpapers) at 640 × 400 by `heif-enc -q 60`: a fresh machine has
  // neither, and this is the one file the stage brings
  const heic = fs.readFileSync(new URL('phone.heic', import.meta.url));
  const heicUpload = await tokenUpload(base, heic, 'IMG_0001.HEIC', uploadToken);
  assert.equal(heicUpload.status, 200, await heicUpload.clone().text());
  const heicUrl = /** @type {{ url: string }} */ (await heicUpload.json()).url;
  const heicVariant = await fetch(`${base}/p/${base58Url.encode(heicUrl)}?width=320&format=jpeg`);
  assert.equal(heicVariant.status, 200, 'a variant of the HEIC');
  const heicPixels = await decode(Buffer.from(await heicVariant.arrayBuffer()));
  assert.deepEqual([heicPixels.format, heicPixels.width, heicPixels.height], ['jpeg', 320, 200]);

  const avatar = async () => {
    const response = await fetch(`${base}/u/alice/avatar`, { redirect: 'manual' });
    await response.arrayBuffer();
    return response;
  };
  const before = (await avatar()).headers.get('location');
  const denied = await fetch(`${base}/admin/accounts/alice`, { method: 'PUT' });
  assert.notEqual(denied.status, 200, "the resolver's admin API is not on the public path");
  await setAvatar('alice', url);
  await waitFor(
    async () => (await avatar()).headers.get('location') !== before,
    20_000,
    'the avatar redirect to the upload',
  );
  const redirect = await avatar();
  assert.equal(redirect.status, 302);
  const location = new URL(redirect.headers.get('location') || '', base);
  const face = await fetch(location);
  assert.equal(face.status, 200);
  const faceInfo = await decode(Buffer.from(await face.arrayBuffer()));
  assert.ok(faceInfo.width > 0 && faceInfo.width === faceInfo.height, 'a square avatar made from the upload');
  assert.match(String(base58Url.decode(location.pathname.split('/')[2])), new RegExp(key));
  await waitFor(
    async () => (await avatar()).headers.get('x-cache') === 'HIT',
    10_000,
    'the redirect cached by varnish',
  );

  const body = JSON.stringify({ account: 'alice', kind: 'avatar' });
  const timestamp = String(Math.floor(Date.now() / 1000));
  const headers = { 'content-type': 'application/json', 'x-timestamp': timestamp };
  const hook = await fetch(`${base}/hooks/avatar`, {
    method: 'POST',
    body,
    headers: { ...headers, 'x-signature': `sha256=${sign(hmacKey, timestamp, Buffer.from(body))}` },
  });
  assert.equal(hook.status, 202, await hook.text());
  await waitFor(async () => (await avatar()).headers.get('x-cache') === 'MISS', 20_000, 'the cached redirect purged');
  const unsigned = await fetch(`${base}/hooks/avatar`, {
    method: 'POST',
    body,
    headers: { ...headers, 'x-signature': 'sha256=00' },
  });
  assert.equal(unsigned.status, 401);
}
