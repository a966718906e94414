// A drop-in for images.hive.blog: every URL shape and call the Hive frontends make, through nginx, with
// what a browser gets checked (status, redirects followed, decoded format and size), each row citing the
// frontend or imagehoster code it comes from. docs/compatibility.md's table lists the same rows.
//   imagehoster = openhive-network/imagehoster (what images.hive.blog runs): src/routes.ts @31c581d,
//     src/proxy.ts @a80b3e3, src/legacy-proxy.ts @035e4c6, src/avatar.ts @9654eab, src/proxy-auth.ts @57113da
//   condenser = openhive-network/condenser src/app/utils/ProxifyUrl.js @cee66d8
//   render-helper = ecency/render-helper src/proxify-image-src.ts @657771d; ecency's imagehoster src/routes.ts @81bbc62
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import { Redis } from 'ioredis';
import sharp from 'sharp';
import { base58Url } from '@stack/lib';
import { challengeHash, keyOf } from '../origin/src/keys.js';
import { launchChromium } from './support/browser.js';
import { hiveSignature, keyAuthority } from './support/hive-keys.js';
import { startHiveNode } from './support/hive-node.js';
import { startHivesigner } from './support/hivesigner.js';
import { startImageServer } from './support/image-server.js';
import { animated, decode, photo } from './support/images.js';
import { root } from './support/processes.js';
import { startStack } from './support/stack.js';

/** @type {Awaited<ReturnType<typeof startStack>>} */
let stack;
/** @type {Awaited<ReturnType<typeof startImageServer>>} */
let site;
/** @type {Awaited<ReturnType<typeof startHiveNode>>} */
let hive;
/** @type {Awaited<ReturnType<typeof startHivesigner>>} */
let hivesigner;
const posting = secp256k1.keygen();
const active = secp256k1.keygen();
let jpg = '';
let png = '';
let gif = '';

before(async () => {
  site = await startImageServer();
  hive = await startHiveNode();
  hivesigner = await startHivesigner();
  jpg = site.add('path.jpg', fs.readFileSync(photo('Path', '1920x1080')));
  png = site.add(
    'logo.png',
    await sharp({ create: { width: 400, height: 250, channels: 4, background: '#20a0c080' } })
      .png()
      .toBuffer(),
    'image/png',
  );
  gif = site.add('anim.gif', await animated(300, 200, 3, 'gif'), 'image/gif');
  hive.setAccount({
    name: 'alice',
    posting: keyAuthority(posting.publicKey),
    active: keyAuthority(active.publicKey),
    reputation: '95832978796820',
    json_metadata: '',
    posting_json_metadata: JSON.stringify({ profile: { version: 2, profile_image: jpg, cover_image: jpg } }),
  });
  stack = await startStack({
    FETCH_ALLOW_PRIVATE_HOSTS: '127.0.0.1',
    HIVE_API_URLS: hive.url,
    AVATAR_SOURCE: 'hive',
    HIVESIGNER_APP: 'cdn.app',
    HIVESIGNER_API_URL: hivesigner.url,
  });
});
after(async () => {
  await stack?.stop();
  await site?.close();
  await hive?.close();
  await hivesigner?.close();
});

const b58 = (/** @type {string} */ url) => base58Url.encode(url);

/**
 * GET through the edge, following redirects as a browser does, keeping each hop. As a client that names no
 * modern format (a crawler, curl): the source's format, as images.hive.blog answers (what each browser gets
 * under negotiation: test/negotiation.test.js).
 * @param {string} url a path or an absolute URL
 * @returns {Promise<{ hops: Array<{ status: number, location: string | null }>, status: number, headers: Headers, body: Buffer }>}
 */
async function browse(url, accept = '*/*') {
  const hops = [];
  let next = new URL(url, stack.base).toString();
  for (let hop = 0; hop < 5; hop += 1) {
    const response = await fetch(next, { redirect: 'manual', headers: { accept } });
    const location = response.headers.get('location');
    hops.push({ status: response.status, location });
    if (response.status >= 300 && response.status < 400 && location) {
      await response.arrayBuffer();
      next = new URL(location, next).toString();
      continue;
    }
    return {
      hops,
      status: response.status,
      headers: response.headers,
      body: Buffer.from(await response.arrayBuffer()),
    };
  }
  throw new Error(`more than 5 redirects from ${url}`);
}

/**
 * The rows: what a frontend sends, what a browser must end up with, and where the shape comes from.
 * `request` is the row's name in docs/compatibility.md's table.
 * @typedef {{ request: string, url: () => string, redirects: number[], format: string, width: number,
 *   height: number | [number, number], frames?: number, maxBytes?: number, cite: string }} Row
 * @type {Row[]}
 */
const ROWS = [
  {
    request: '/768x0/<url>',
    url: () => `/768x0/${jpg}`,
    redirects: [301],
    format: 'jpeg',
    width: 768,
    height: 480,
    cite: 'condenser ProxifyUrl.js:14,45-46 (0x0 becomes 768x0); imagehoster legacy-proxy.ts:32-37,42-44 (301 to /p/ format=match mode=fit)',
  },
  {
    request: '/1536x0/<url>',
    url: () => `/1536x0/${jpg}`,
    redirects: [301],
    format: 'jpeg',
    width: 1536,
    height: 960,
    cite: 'condenser ProxifyUrl.js:15,18 (the srcset 2x)',
  },
  {
    request: '/0x0/<url>.gif',
    url: () => `/0x0/${gif}`,
    redirects: [301],
    format: 'gif',
    width: 300,
    height: 200,
    frames: 3,
    cite: 'condenser ProxifyUrl.js:43-46 (GIFs keep 0x0); imagehoster proxy.ts:292-298 (GIF passed through at its size)',
  },
  {
    request: '/100x200/<url>',
    url: () => `/100x200/${png}`,
    redirects: [301],
    format: 'png',
    width: 100,
    height: [62, 63],
    cite: 'condenser ProxifyUrl.js:49-50 (explicit dimensions); imagehoster legacy-proxy.ts:36-37 + proxy.ts fit',
  },
  {
    request: '/640x0/https://images.hive.blog/0x0/<url>',
    url: () => `/640x0/https://images.hive.blog/0x0/${jpg}`,
    redirects: [301],
    format: 'jpeg',
    width: 640,
    height: 400,
    cite: 'condenser ProxifyUrl.js:3-8 (nested proxy URLs); imagehoster proxy.ts:181-187 (double-proxied URLs resolved)',
  },
  {
    request: '/768x0/<url>?token=<preview token>',
    url: () => `/768x0/${jpg}?token=${'ab'.repeat(24)}`,
    redirects: [301],
    format: 'jpeg',
    width: 768,
    height: 480,
    cite: 'imagehoster proxy-auth.ts:114 (48-hex token) and README "Proxy auth tokens" (?token= on proxied URLs)',
  },
  {
    request: '/p/<b58>.webp?format=webp&mode=fit&width=W',
    url: () => `/p/${b58(jpg)}.webp?format=webp&mode=fit&width=600`,
    redirects: [],
    format: 'webp',
    width: 600,
    height: 375,
    cite: 'render-helper proxify-image-src.ts:51-54,76 (".webp" appended for format=webp, mode=fit)',
  },
  {
    request: '/p/<b58>.png?format=match&mode=fit',
    url: () => `/p/${b58(jpg)}.png?format=match&mode=fit`,
    redirects: [],
    format: 'jpeg',
    width: 1280,
    height: 800,
    cite: 'render-helper proxify-image-src.ts:76 (".png" for every other format); imagehoster proxy.ts (max_image_width 1280 without a size)',
  },
  {
    request: '/p/<b58>?width=640.5',
    url: () => `/p/${b58(jpg)}?width=640.5`,
    redirects: [],
    format: 'jpeg',
    width: 640,
    height: 400,
    cite: 'imagehoster proxy.ts:102 (Number.parseInt: the leading whole number)',
  },
  {
    request: '/p/<b58>?width=abc',
    url: () => `/p/${b58(jpg)}?width=abc`,
    redirects: [],
    format: 'jpeg',
    width: 1280,
    height: 800,
    cite: 'imagehoster proxy.ts:102 (not a number: no size, the default box)',
  },
  {
    request: '/p/<b58>?format=jpg&width=W&height=H',
    url: () => `/p/${b58(png)}?format=jpg&width=100&height=100`,
    redirects: [],
    format: 'jpeg',
    width: 100,
    height: 100,
    cite: 'imagehoster proxy.ts:106-108 (cover by default), 125-127 ("jpg" is JPEG)',
  },
  {
    request: '/p/<b58>?format=avif&width=W',
    url: () => `/p/${b58(jpg)}?format=avif&width=200`,
    redirects: [],
    format: 'heif',
    width: 200,
    height: 125,
    cite: 'imagehoster proxy.ts:135-136 (AVIF)',
  },
  {
    request: '/p/<b58>?format=match&mode=fit&width=W (srcset)',
    url: () => `/p/${b58(jpg)}?format=match&mode=fit&width=1024`,
    redirects: [],
    format: 'jpeg',
    width: 1024,
    height: 640,
    cite: 'render-helper proxify-image-src.ts buildSrcSet (widths 320, 600, 800, 1024, 1280; no extension since 2026)',
  },
  {
    request: '/p/<b58>?format=match&mode=fit&width=W&blur=1',
    url: () => `/p/${b58(jpg)}?format=match&mode=fit&width=600&blur=1`,
    redirects: [],
    format: 'jpeg',
    width: 20,
    height: [12, 13],
    maxBytes: 2048,
    cite: 'render-helper proxify-image-src.ts (opts.blur: a placeholder); ecency imagehoster proxy.ts (20 px wide, blurred, JPEG)',
  },
  {
    request: '/p/<b58 of a GIF>?blur=1',
    url: () => `/p/${b58(gif)}?format=match&mode=fit&blur=1`,
    redirects: [],
    format: 'jpeg',
    width: 20,
    height: 13,
    maxBytes: 2048,
    cite: "ecency imagehoster proxy.ts (a GIF's placeholder: its first frame)",
  },
  {
    request: '/p/<b58 of a PNG>?blur=1',
    url: () => `/p/${b58(png)}?blur=1`,
    redirects: [],
    format: 'jpeg',
    width: 20,
    height: [12, 13],
    maxBytes: 2048,
    cite: "ecency imagehoster proxy.ts (a PNG's placeholder: a JPEG too)",
  },
  {
    request: '/u/<account>/avatar',
    url: () => '/u/alice/avatar',
    redirects: [302],
    format: 'jpeg',
    width: 128,
    height: 128,
    cite: 'imagehoster avatar.ts:11-15,24,67 (302 to /p/…?width=128&height=128, cover)',
  },
  {
    request: '/u/<account>/avatar/small|medium|large',
    url: () => '/u/alice/avatar/small',
    redirects: [302],
    format: 'jpeg',
    width: 64,
    height: 64,
    cite: 'imagehoster avatar.ts:11-15 (small 64, medium 128, large 512)',
  },
  {
    request: '/u/<account>/avatar/<other size>',
    url: () => '/u/alice/avatar/64x64',
    redirects: [301, 302],
    format: 'jpeg',
    width: 128,
    height: 128,
    cite: 'imagehoster avatar.ts:24 (an unknown size is the medium avatar)',
  },
  {
    request: '/u/<account>/avatar/',
    url: () => '/u/alice/avatar/',
    redirects: [301, 302],
    format: 'jpeg',
    width: 128,
    height: 128,
    cite: 'imagehoster routes.ts:25 (/u/:username/avatar/:size?)',
  },
  {
    request: '/u/<account>/cover',
    url: () => '/u/alice/cover',
    redirects: [302],
    format: 'jpeg',
    width: 1344,
    height: 240,
    cite: 'imagehoster routes.ts:26 (/u/:username/cover)',
  },
  {
    request: '/webp/u/<account>/avatar/<size>',
    url: () => '/webp/u/alice/avatar/large',
    redirects: [301, 302],
    format: 'jpeg',
    width: 512,
    height: 512,
    cite: 'ecency imagehoster routes.ts:39-43 (the deprecated /webp/ routes redirect to the plain ones)',
  },
];

for (const row of ROWS) {
  test(`compat: ${row.request} (${row.cite.split(' (')[0]})`, async () => {
    const answer = await browse(row.url());
    const redirects = answer.hops.slice(0, -1).map((hop) => hop.status);
    // a wrong answer says which layer gave it and what each layer says now
    if (answer.status !== 200 || String(redirects) !== String(row.redirects))
      assert.fail(
        `${row.request}: redirects ${JSON.stringify(answer.hops)}, then ${answer.status} ${answer.body.toString().slice(0, 300)}\n\n${await stack.diagnosis()}`,
      );
    const image = await decode(answer.body);
    assert.equal(image.format, row.format, `${row.request}: format`);
    assert.equal(image.width, row.width, `${row.request}: width`);
    const [low, high] = Array.isArray(row.height) ? row.height : [row.height, row.height];
    assert.ok(
      image.height >= low && image.height <= high,
      `${row.request}: height ${image.height}, expected ${low}..${high}`,
    );
    if (row.frames) assert.equal(image.frames, row.frames, `${row.request}: frames`);
    if (row.maxBytes) assert.ok(answer.body.length < row.maxBytes, `${row.request}: ${answer.body.length} bytes`);
  });
}

test('compat: the preview token changes no image and splits no cache; a legacy URL with it redirects as without it', async () => {
  const plain = `/p/${b58(jpg)}?width=300&format=match`;
  await browse(plain);
  const again = await browse(`${plain}&token=${'cd'.repeat(24)}`);
  assert.equal(again.headers.get('x-cache'), 'HIT');
  const legacy = await fetch(`${stack.base}/768x0/${jpg}?token=${'ab'.repeat(24)}`, { redirect: 'manual' });
  const bare = await fetch(`${stack.base}/768x0/${jpg}`, { redirect: 'manual' });
  assert.equal(legacy.headers.get('location'), bare.headers.get('location'));
  // a token of the source's own (a Firebase download token) is the source's: kept
  const firebase = await fetch(`${stack.base}/768x0/${jpg}?alt=media&token=1b2c3d4e-5f60`, { redirect: 'manual' });
  assert.equal(
    base58Url.decode(/** @type {string} */ (firebase.headers.get('location')).split('/p/')[1].split('?')[0]),
    `${jpg}?alt=media&token=1b2c3d4e-5f60`,
  );
});

test("compat: an unknown account's avatar is a JSON 404 (imagehoster avatar.ts:32), a bad mode a JSON 400 (proxy.ts:113-117)", async () => {
  const missing = await browse('/u/nobody-here/avatar');
  assert.equal(missing.status, 404);
  assert.equal(JSON.parse(missing.body.toString()).error.name, 'no_such_account');
  const mode = await browse(`/p/${b58(jpg)}?mode=zoom`);
  assert.equal(mode.status, 400);
  assert.deepEqual(JSON.parse(mode.body.toString()).error.info.name, 'mode');
  const health = await browse('/.well-known/healthcheck.json');
  assert.equal(health.status, 200, 'imagehoster routes.ts:24');
  assert.equal(JSON.parse(health.body.toString()).ok, true);
});

/** Hive's signature text, hex. @param {Uint8Array} digest @param {Uint8Array} secretKey */
const hiveSign = (digest, secretKey) => hiveSignature(digest, secretKey).toString('hex');

test('compat: a Hive upload (POST /<account>/<signature>, imagehoster routes.ts:28) is served at the URL it answers', async () => {
  const bytes = fs.readFileSync(photo('Path', '1920x1080'));
  const form = new FormData();
  form.append('image_file', new Blob([new Uint8Array(bytes)]), 'path.jpg');
  const response = await fetch(
    `${stack.base}/alice/${hiveSign(challengeHash().update(bytes).digest(), posting.secretKey)}`,
    { method: 'POST', body: form },
  );
  assert.equal(response.status, 200);
  const { url } = /** @type {{ url: string }} */ (await response.json());
  const served = await browse(new URL(url).pathname);
  assert.equal(served.status, 200);
  assert.ok(served.body.equals(bytes), 'the uploaded bytes');
  // and resized through /p/ of its own URL (imagehoster proxy.ts:209-216: own uploads read from the store)
  const resized = await decode((await browse(`/p/${b58(url)}?width=64&height=64`)).body);
  assert.deepEqual([resized.width, resized.height], [64, 64]);
});

test('compat: a 600-frame GIF (160 × 90, what images.hive.blog takes) uploads, and /0x0/ of it is animated with all 600 frames', async () => {
  const frames = 600;
  const pixels = Buffer.alloc(160 * 90 * frames * 3);
  for (let i = 0; i < pixels.length; i += 1) pixels[i] = (i * 7 + Math.floor(i / 43200) * 13) & 255;
  const bytes = await sharp(pixels, { raw: { width: 160, height: 90 * frames, channels: 3, pageHeight: 90 } })
    .gif({ delay: Array(frames).fill(40), loop: 0 })
    .toBuffer();
  const form = new FormData();
  form.append('image_file', new Blob([new Uint8Array(bytes)]), 'long.gif');
  const response = await fetch(
    `${stack.base}/alice/${hiveSign(challengeHash().update(bytes).digest(), posting.secretKey)}`,
    { method: 'POST', body: form },
  );
  assert.equal(response.status, 200, await response.clone().text());
  const { url } = /** @type {{ url: string }} */ (await response.json());
  const served = await browse(`/0x0/${url}`, 'image/avif,image/webp,*/*');
  assert.equal(served.status, 200);
  const image = await decode(served.body);
  assert.deepEqual([image.width, image.height, image.frames], [160, 90, 600]);
});

test('compat: a checksum-signed upload (POST /cs/<account>/<signature>, imagehoster upload.ts uploadCsHandler) gets the same key as a data-signed one', async () => {
  const bytes = fs.readFileSync(photo('Path', '1920x1080'));
  const checksum = createHash('sha256').update(bytes).digest();
  /** @param {Uint8Array} key */
  const send = (key) => {
    const form = new FormData();
    form.append('image_file', new Blob([new Uint8Array(bytes)]), 'path.jpg');
    return fetch(`${stack.base}/cs/alice/${hiveSign(challengeHash().update(checksum).digest(), key)}`, {
      method: 'POST',
      body: form,
    });
  };
  const response = await send(posting.secretKey);
  assert.equal(response.status, 200);
  const { url } = /** @type {{ url: string }} */ (await response.json());
  assert.equal(new URL(url).pathname.split('/')[1], keyOf(bytes));
  assert.ok((await browse(new URL(url).pathname)).body.equals(bytes));
  // signed over the bytes themselves is not a checksum signature
  const form = new FormData();
  form.append('image_file', new Blob([new Uint8Array(bytes)]), 'path.jpg');
  const wrong = await fetch(
    `${stack.base}/cs/alice/${hiveSign(challengeHash().update(bytes).digest(), posting.secretKey)}`,
    { method: 'POST', body: form },
  );
  assert.equal(wrong.status, 403);
  assert.equal(/** @type {any} */ (await wrong.json()).error.name, 'invalid_signature');
});

test('compat: a Hivesigner upload (POST /hs/<access token>, imagehoster upload.ts uploadHsHandler) is taken only from a user who authorised this app', async () => {
  const bytes = await sharp({ create: { width: 320, height: 200, channels: 3, background: '#406080' } })
    .png()
    .toBuffer();
  const granted = {
    name: 'alice',
    posting: { weight_threshold: 1, account_auths: [['cdn.app', 1]], key_auths: [] },
    active: { weight_threshold: 1, account_auths: [], key_auths: [] },
  };
  /** @param {string} token */
  const send = async (token) => {
    const form = new FormData();
    form.append('image_file', new Blob([new Uint8Array(bytes)]), 'chart.png');
    const response = await fetch(`${stack.base}/hs/${token}`, { method: 'POST', body: form });
    return { status: response.status, body: /** @type {any} */ (await response.json()) };
  };
  const ok = await send(hivesigner.grant(granted, 'cdn.app'));
  assert.equal(ok.status, 200, JSON.stringify(ok.body));
  assert.equal(new URL(ok.body.url).pathname.split('/')[1], keyOf(bytes));
  assert.ok((await browse(new URL(ok.body.url).pathname)).body.equals(bytes));
  /** @type {Array<[string, string, number, string]>} */
  const refused = [
    ['issued to another app', hivesigner.grant(granted, 'other.app'), 403, 'invalid_token'],
    [
      'the app not authorised on the chain',
      hivesigner.grant({ ...granted, posting: { weight_threshold: 1, account_auths: [], key_auths: [] } }, 'cdn.app'),
      403,
      'invalid_token',
    ],
    ['a scope without comment', hivesigner.grant(granted, 'cdn.app', ['login']), 403, 'invalid_token'],
    [
      'unknown to Hivesigner',
      Buffer.from(
        JSON.stringify({ signed_message: { type: 'posting', app: 'cdn.app' }, authors: ['alice'], signatures: ['00'] }),
      ).toString('base64url'),
      403,
      'invalid_token',
    ],
    ['not a token', 'not-base64-json', 400, 'invalid_token'],
  ];
  for (const [name, token, status, error] of refused) {
    const answer = await send(token);
    assert.deepEqual([answer.status, answer.body.error?.name], [status, error], name);
  }
});

/** POST /proxy-auth as condenser's editor sends it. @param {string} account @param {string} signature @param {string} body */
function proxyAuth(account, signature, body) {
  return fetch(`${stack.base}/proxy-auth/${account}/${signature}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
}

/** @param {string} account @param {number} timestamp */
const challenge = (account, timestamp) =>
  createHash('sha256')
    .update(`Authorize image proxy preview for ${account} at ${new Date(timestamp).toISOString()}`)
    .digest();

test('compat: POST /proxy-auth/<account>/<signature> issues a 30-minute token in Redis, never cached (imagehoster proxy-auth.ts:45-120)', async () => {
  const timestamp = Date.now();
  const response = await proxyAuth(
    'alice',
    hiveSign(challenge('alice', timestamp), posting.secretKey),
    JSON.stringify({ timestamp }),
  );
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('cache-control'), 'private, no-store');
  const { token, expires_in: expiresIn } = /** @type {{ token: string, expires_in: number }} */ (await response.json());
  assert.match(token, /^[0-9a-f]{48}$/);
  assert.equal(expiresIn, 1800);
  const redis = new Redis(stack.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    assert.equal(await redis.get(`proxy:auth:token:${token}`), 'alice');
    const ttl = await redis.ttl(`proxy:auth:token:${token}`);
    assert.ok(ttl > 1790 && ttl <= 1800, `ttl ${ttl}`);
  } finally {
    redis.disconnect();
  }
  // the preview URL with the token renders
  const preview = await browse(`/p/${b58(png)}?format=match&mode=fit&width=200&token=${token}`);
  assert.equal(preview.status, 200);
  assert.equal((await decode(preview.body)).width, 200);
});

test('compat: /proxy-auth refuses what it must with JSON errors, and keeps serving', async () => {
  const now = Date.now();
  const good = hiveSign(challenge('alice', now), posting.secretKey);
  /** @type {Array<[string, Promise<Response>, number, string]>} */
  const cases = [
    [
      'the active key (posting only)',
      proxyAuth('alice', hiveSign(challenge('alice', now), active.secretKey), JSON.stringify({ timestamp: now })),
      403,
      'invalid_signature',
    ],
    [
      'another timestamp than signed',
      proxyAuth('alice', good, JSON.stringify({ timestamp: now + 1 })),
      403,
      'invalid_signature',
    ],
    [
      'ten minutes old',
      proxyAuth(
        'alice',
        hiveSign(challenge('alice', now - 600_000), posting.secretKey),
        JSON.stringify({ timestamp: now - 600_000 }),
      ),
      400,
      'invalid_parameter',
    ],
    ['no timestamp', proxyAuth('alice', good, '{}'), 400, 'invalid_parameter'],
    [
      'a string timestamp',
      proxyAuth('alice', good, JSON.stringify({ timestamp: String(now) })),
      400,
      'invalid_parameter',
    ],
    ['not JSON', proxyAuth('alice', good, '{"timestamp":'), 400, 'invalid_json'],
    [
      'a body too big',
      proxyAuth('alice', good, JSON.stringify({ timestamp: now, pad: 'x'.repeat(4000) })),
      413,
      'payload_too_large',
    ],
    ['a malformed signature', proxyAuth('alice', 'zz', JSON.stringify({ timestamp: now })), 400, 'invalid_signature'],
    [
      'an unknown account',
      proxyAuth(
        'nobody-here',
        hiveSign(challenge('nobody-here', now), posting.secretKey),
        JSON.stringify({ timestamp: now }),
      ),
      404,
      'no_such_account',
    ],
    ['a bad account name', proxyAuth('Alice', good, JSON.stringify({ timestamp: now })), 400, 'invalid_account'],
  ];
  for (const [name, pending, status, error] of cases) {
    const response = await pending;
    assert.equal(response.status, status, name);
    assert.match(response.headers.get('content-type') || '', /^application\/json/, name);
    assert.equal(/** @type {any} */ (await response.json()).error.name, error, name);
  }
  const later = Date.now();
  const ok = await proxyAuth(
    'alice',
    hiveSign(challenge('alice', later), posting.secretKey),
    JSON.stringify({ timestamp: later }),
  );
  assert.equal(ok.status, 200);
});

test('compat: the compatibility table (docs/compatibility.md) lists every row', () => {
  // a | in a table cell is written \\|
  const section = fs.readFileSync(path.join(root, 'docs', 'compatibility.md'), 'utf8').replaceAll('\\|', '|');
  for (const row of ROWS)
    assert.ok(section.includes(`\`${row.request}\``), `docs/compatibility.md lacks the row ${row.request}`);
});

test("compat: a headless Chromium renders every <img> the frontends' rules build, at its natural size", async () => {
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    const tags = ROWS.map((row, i) => `<img id="i${i}" src="${new URL(row.url(), stack.base)}">`).join('\n');
    await page.setContent(`<!doctype html><html><body>${tags}</body></html>`, { waitUntil: 'load', timeout: 120_000 });
    const sizes = await page.evaluate(() =>
      [...document.images].map((img) => ({
        id: img.id,
        complete: img.complete,
        width: img.naturalWidth,
        height: img.naturalHeight,
      })),
    );
    for (const [i, row] of ROWS.entries()) {
      const size = sizes.find((entry) => entry.id === `i${i}`);
      assert.ok(size?.complete, `${row.request}: loaded`);
      assert.equal(size?.width, row.width, `${row.request}: natural width in Chromium`);
      const [low, high] = Array.isArray(row.height) ? row.height : [row.height, row.height];
      assert.ok(
        (size?.height ?? 0) >= low && (size?.height ?? 0) <= high,
        `${row.request}: natural height ${size?.height} in Chromium`,
      );
    }
  } finally {
    await browser.close();
  }
});
