// The bad-input campaign: the corpus through the proxy and the upload routes, URL fuzzing of every route,
// SSRF targets in every spelling (a canary server counts what reaches it), signature and HMAC tampering.
// Expectation for every case: a 4xx JSON error or a correct image; never a 5xx, never a crash, never a
// request to a forbidden address. Used by test/bad-input-campaign.test.js (asserting) and the bench (report).
import http from 'node:http';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import { base58Url } from '@stack/lib';
import { challengeHash } from '../origin/src/keys.js';
import { sign } from '../purge-service/src/signature.js';
import { hiveSignature, keyAuthority } from '../test/support/hive-keys.js';
import { decode } from '../test/support/images.js';
import { buildCorpus } from './corpus.js';
import { mutate } from './fuzz.js';

/** A server that must never be reached: it counts every request. */
export async function startCanary() {
  let hits = 0;
  const server = http.createServer((_req, res) => {
    hits += 1;
    res.end('canary');
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(null)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return { port, hits: () => hits, close: () => new Promise((resolve) => server.close(resolve)) };
}

/** Serves the corpus by name, as a remote site would (reached as "localhost", the one allowed private host). @param {import('./corpus.js').Case[]} cases @param {number} canaryPort */
export async function startCorpusServer(cases, canaryPort) {
  const byName = new Map(cases.map((entry) => [entry.name, entry]));
  const server = http.createServer((req, res) => {
    const name = decodeURIComponent((req.url || '/').slice(1));
    if (name === 'redirect-to-canary')
      return res.writeHead(302, { location: `http://127.0.0.1:${canaryPort}/x.jpg` }).end();
    const entry = byName.get(name);
    if (!entry) return res.writeHead(404).end();
    return res.writeHead(200, { 'content-type': entry.type, 'content-length': entry.body.length }).end(entry.body);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(null)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return { base: `http://localhost:${port}`, close: () => new Promise((resolve) => server.close(resolve)) };
}

/**
 * A multipart/form-data body of `parts` (a file where it has a filename, else a field), as a browser sends it.
 * @param {string} boundary @param {Array<{ name: string, filename?: string, type?: string, body: Buffer }>} parts
 */
function multipartBody(boundary, parts) {
  return Buffer.concat([
    ...parts.flatMap(({ name, filename, type, body }) => [
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="${name}"${filename ? `; filename="${filename}"\r\nContent-Type: ${type}` : ''}\r\n\r\n`,
      ),
      body,
      Buffer.from('\r\n'),
    ]),
    Buffer.from(`--${boundary}--\r\n`),
  ]);
}

/** What oddHeaders makes its values of: pieces of ranges, entity tags, dates, media types and q-values. */
const ODD_PIECES = [
  ...['bytes=', '0', '-', '1', ',', '99999999999999999999', '-0', ' ', '=', 'x', '18446744073709551616', 'W/"'],
  ...['"', '*', ';q=', 'image/', 'avif', 'webp', '*/*', 'q=0', 'q=1.5', 'gzip', 'NaN', 'Thu, 01 Jan 1970'],
];

/**
 * Request headers a variant's answer reads, one to three of them, with odd values; deterministic per seed.
 * @param {number} seed
 */
function oddHeaders(seed) {
  const names = ['range', 'if-range', 'if-none-match', 'if-modified-since', 'accept', 'accept-encoding'];
  /** @type {Record<string, string>} */
  const headers = {};
  const count = 1 + (seed % 3);
  for (let i = 0; i < count; i += 1) {
    const words = randomText(seed * 31 + i * 7, 1 + ((seed + i) % 6), 'abcdefghijklmnopqrstuvwx');
    headers[names[(seed * 5 + i * 3) % names.length]] = [...words]
      .map((letter) => ODD_PIECES[(letter.charCodeAt(0) - 97) % ODD_PIECES.length])
      .join('');
  }
  return headers;
}

/** Random text from an alphabet, deterministic per seed. @param {number} seed @param {number} length @param {string} alphabet */
function randomText(seed, length, alphabet) {
  let state = seed;
  let out = '';
  for (let i = 0; i < length; i += 1) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    out += alphabet[state % alphabet.length];
  }
  return out;
}

/**
 * @param {{ base: string, corpus: import('./corpus.js').Case[], corpusBase: string, canaryPort: number, uploadToken: string,
 *   hmacKey: string, hiveKey: Uint8Array, account: string,
 *   direct?: Record<string, (path: string, init?: RequestInit) => Promise<Response>> }} options direct: programs
 *   behind the edge, asked straight (haproxy's images frontend, the origin)
 */
export async function runCampaign({
  base,
  corpus,
  corpusBase,
  canaryPort,
  uploadToken,
  hmacKey,
  hiveKey,
  account,
  direct,
}) {
  /** @type {Record<string, { cases: number, images: number, errors4xx: number, problems: string[] }>} */
  const classes = {};
  /**
   * @param {string} klass @param {string} label @param {Response} response
   * @param {{ expect?: 'image'|'error'|'either'|'any', width?: number, height?: number, bytes?: Buffer }} [want]
   *   bytes: an image answer must be exactly these bytes (an original is served as it was uploaded)
   */
  async function judge(klass, label, response, want = { expect: 'any' }) {
    const entry = classOf(klass);
    entry.cases += 1;
    const body = Buffer.from(await response.arrayBuffer());
    const type = response.headers.get('content-type') || '';
    if (response.status >= 500)
      return entry.problems.push(`${label}: ${response.status} ${body.toString().slice(0, 120)}`);
    // a range past the end: a 416 that says the length (RFC 9110); varnish's, for a cached object, has no body
    if (response.status === 416 && /^bytes \*\/\d+$/.test(response.headers.get('content-range') || '')) {
      entry.errors4xx += 1;
      return undefined;
    }
    if (response.status >= 400) {
      let name;
      try {
        name = JSON.parse(body.toString()).error?.name;
      } catch {
        name = null;
      }
      if (!type.startsWith('application/json') || !name)
        return entry.problems.push(`${label}: ${response.status} without a JSON error`);
      if (want.expect === 'image')
        return entry.problems.push(`${label}: expected an image, got ${response.status} ${name}`);
      entry.errors4xx += 1;
      return undefined;
    }
    if (want.expect === 'error') return entry.problems.push(`${label}: expected a 4xx, got ${response.status}`);
    if (want.expect === 'image' && !(response.status === 200 && type.startsWith('image/')))
      return entry.problems.push(`${label}: expected an image, got ${response.status} ${type}`);
    if (response.status === 200 && type.startsWith('image/')) {
      if (want.bytes && !body.equals(want.bytes))
        return entry.problems.push(`${label}: not the bytes that were uploaded`);
      const info = await decode(body).catch(() => null);
      if (!info) return entry.problems.push(`${label}: a ${type} that does not decode`);
      if (want.width && (info.width !== want.width || info.height !== want.height))
        return entry.problems.push(`${label}: ${info.width}×${info.height}, expected ${want.width}×${want.height}`);
      entry.images += 1;
    }
    return undefined;
  }
  /** @param {string} klass */
  function classOf(klass) {
    return classes[klass] || (classes[klass] = { cases: 0, images: 0, errors4xx: 0, problems: [] });
  }
  /**
   * An answer judged, or no answer at all (a request that got none within its time) counted as a problem.
   * @param {string} klass @param {string} label @param {Response | Error} answer @param {Parameters<typeof judge>[3]} [want]
   */
  async function judgeAnswer(klass, label, answer, want) {
    if (!(answer instanceof Error)) return judge(klass, label, answer, want);
    const entry = classOf(klass);
    entry.cases += 1;
    entry.problems.push(`${label}: no answer (${answer.message})`);
    return undefined;
  }
  /**
   * `ask`'s answer, or the Error of a request that got none in 10 s.
   * @param {(path: string, init?: RequestInit) => Promise<Response>} ask @param {string} path @param {RequestInit} [init]
   */
  const within10s = (ask, path, init = {}) =>
    ask(path, { ...init, signal: AbortSignal.timeout(10_000) }).catch((/** @type {Error} */ err) => err);
  const get = (/** @type {string} */ path, /** @type {RequestInit} */ init = {}) =>
    fetch(base + path, { redirect: 'manual', ...init });
  const proxied = (/** @type {string} */ url, query = 'width=1000&height=1000&mode=fit') =>
    `/p/${base58Url.encode(url)}?${query}`;

  for (const entry of corpus) {
    await judge(entry.class, `proxy ${entry.name}`, await get(proxied(`${corpusBase}/${entry.name}`)), entry);
    const form = new FormData();
    form.append('image_file', new Blob([new Uint8Array(entry.body)]), `${entry.name}.bin`);
    const upload = await get('/upload', {
      method: 'POST',
      headers: { authorization: `Bearer ${uploadToken}` },
      body: form,
    });
    // an upload is JSON ({"url"}), not an image: valid ones must be accepted, broken ones refused
    if (entry.upload) {
      await judge(`upload ${entry.class}`, `upload ${entry.name}`, upload.clone(), { expect: entry.upload });
    } else if (entry.expect === 'image' && upload.status !== 200) {
      await judge(`upload ${entry.class}`, `upload ${entry.name}`, upload.clone(), { expect: 'image' });
    } else {
      await judge(`upload ${entry.class}`, `upload ${entry.name}`, upload.clone(), {
        expect: entry.expect === 'error' ? 'error' : 'any',
      });
    }
    if (upload.status === 200) {
      const { url } = /** @type {any} */ (await upload.json());
      await judge(`upload ${entry.class}`, `served ${entry.name}`, await fetch(url), {
        expect: 'image',
        bytes: entry.body,
      });
    }
  }

  const alphabet58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
  for (let seed = 1; seed <= 40; seed += 1)
    await judge(
      'fuzz /p/ base58',
      `/p/random ${seed}`,
      await get(`/p/${randomText(seed, 5 + (seed % 60), alphabet58)}?width=${seed}`),
    );
  for (let seed = 1; seed <= 40; seed += 1) {
    const bytes = randomText(seed * 7, 1 + (seed % 40), "%0123456789abcdefABCDEF/._-~?&=#;:@!$'()*+,");
    await judge('fuzz paths', `path ${seed}`, await get(`/${bytes.replace(/#/g, '%23')}`));
  }
  for (const length of [2000, 7000, 20_000, 100_000])
    await judge('fuzz overlong', `overlong ${length}`, await get(`/p/${'z'.repeat(length)}`));
  const valid = `${corpusBase}/exif-orientation-1`;
  for (const value of [
    '0',
    '-1',
    '1',
    '8000',
    '8001',
    '99999999',
    '999999999999',
    '1e3',
    'NaN',
    '0x10',
    ' 5',
    '５',
    '',
    '1.5',
    '%00',
  ]) {
    await judge(
      'fuzz dimensions',
      `width=${value}`,
      await get(`/p/${base58Url.encode(valid)}?width=${encodeURIComponent(value)}&height=${encodeURIComponent(value)}`),
    );
  }
  for (const query of [
    'mode=zoom',
    'mode=',
    'format=bmp',
    'format=AVIF',
    'format[]=png',
    'width=10&width=20',
    'mode=cover&mode=fit',
  ]) {
    await judge('fuzz parameters', query, await get(`/p/${base58Url.encode(valid)}?${query}`));
  }
  for (const path of [
    '/0x0/',
    '/99999x99999/http://x',
    '/1x1/javascript:alert(1)',
    '/10x10/%00',
    '/u/../avatar',
    '/u/alice/avatar/../../etc',
    '/u/alice/avatar/huge',
    `/u/${'a'.repeat(300)}/avatar`,
    '/u/%00/cover',
    '/..%2f..%2fetc%2fpasswd',
    '/%2e%2e/%2e%2e/',
    '/DQm%00',
    '/.env',
    '/.git/config',
    '/healthz/../admin',
  ]) {
    await judge('fuzz routes', path, await get(path));
  }

  // request headers a variant's answer reads (ranges, conditions, Accept, …), seeded combinations of odd
  // values, on kept-alive connections to the edge, to haproxy's images frontend and to the origin itself: an
  // answer that leaves its connection unable to answer the next (a 416 once did) shows as a request that
  // gets no answer in 10 s
  const variantPath = proxied(valid, 'width=300');
  const targets = /** @type {Array<[string, (path: string, init?: RequestInit) => Promise<Response>]>} */ ([
    ['edge', get],
    ...(direct ? Object.entries(direct) : []),
  ]);
  for (const [target, ask] of targets) {
    await ask(variantPath).then((response) => response.arrayBuffer());
    const ranges = ['bytes=0-9', 'bytes=999999-', 'bytes=-0', 'bytes=5-1', 'bytes=0-1,5-6', 'items=0-5', 'x'];
    // each range, then a plain request (on the connection it left, where it is kept alive)
    /** @type {Record<string, string>} */
    const plain = {};
    const cases = [
      ...ranges.flatMap((range) => [{ range }, plain]),
      ...Array.from({ length: 120 }, (_, i) => oddHeaders(i + 1)),
    ];
    for (const headers of cases) {
      await judgeAnswer(
        'fuzz headers',
        `${target} ${JSON.stringify(headers)}`,
        await within10s(ask, variantPath, { headers }),
      );
    }
  }

  // the upload's form itself, mutated by seed and cut short inside each part, through the token upload and
  // the signed Hive one (which reads the body before it can check the signature: anyone reaches the form's
  // parser). Two forms: a text field then the image (taken whole), and a file the upload skips then the image
  // (refused whole: one file a form; cut short in the skipped file, it once ended the origin)
  const photo = corpus.find((entry) => entry.name === 'exif-orientation-1')?.body || Buffer.alloc(0);
  const imagePart = { name: 'image_file', filename: 'photo.jpg', type: 'image/jpeg', body: photo };
  const taken = multipartBody('fuzz', [{ name: 'note', body: Buffer.from('a caption') }, imagePart]);
  const skipped = multipartBody('fuzz', [
    { name: 'other', filename: 'notes.txt', type: 'text/plain', body: Buffer.from('not the image') },
    imagePart,
  ]);
  const forms = [taken, skipped].flatMap((form, f) => [
    ...Array.from({ length: 20 }, (_, i) => ({
      label: `form ${f} mutation ${i + 1}`,
      body: mutate(form, 7919 * (i + 1)),
    })),
    ...[60, 140, form.length - 40, form.length - 2].map((at) => ({
      label: `form ${f} cut at ${at}`,
      body: form.subarray(0, at),
    })),
  ]);
  /**
   * A form posted by `ask`, to the token upload or the Hive one; an Error when no answer came in 10 s.
   * @param {(path: string, init?: RequestInit) => Promise<Response>} ask @param {Buffer} body @param {boolean} hive
   */
  const post = (ask, body, hive) =>
    within10s(ask, hive ? `/${account}/${'ab'.repeat(65)}` : '/upload', {
      method: 'POST',
      headers: {
        'content-type': 'multipart/form-data; boundary=fuzz',
        ...(hive ? {} : { authorization: `Bearer ${uploadToken}` }),
      },
      body: new Uint8Array(body),
    });
  /** @param {string} label @param {Response | Error} answer @param {Parameters<typeof judge>[3]} [want] */
  const judgeForm = (label, answer, want) => judgeAnswer('fuzz multipart', label, answer, want);
  // the form whole is taken (a 200 with its URL; anything else is a problem), so the mutations start from one
  const whole = await post(get, taken, false);
  await judgeForm(
    'the form whole',
    whole,
    !(whole instanceof Error) && whole.status === 200 ? undefined : { expect: 'image' },
  );
  // a form refused at its first part header with 300 KB after it unread, then a plain request on the
  // connection it leaves (left unread, that body once stalled it)
  const early = Buffer.concat([Buffer.from('--fuzz\r\nnot a header\r\n\r\n'), Buffer.alloc(300_000, 120)]);
  for (const [target, ask] of targets) {
    for (const [i, { label, body }] of forms.entries()) {
      const hive = i % 2 === 1;
      await judgeForm(`${target} ${hive ? 'hive' : 'token'} ${label}`, await post(ask, body, hive));
    }
    for (const hive of [false, true]) {
      await judgeForm(
        `${target} ${hive ? 'hive' : 'token'} refused early, 300 KB unread`,
        await post(ask, early, hive),
      );
      await judgeForm(`${target} the request after it`, await within10s(ask, variantPath));
    }
  }

  const port = canaryPort;
  const ssrf = [
    `http://127.0.0.1:${port}/`,
    `http://127.1:${port}/`,
    `http://0x7f000001:${port}/`,
    `http://2130706433:${port}/`,
    `http://0177.0.0.1:${port}/`,
    `http://127.000.000.001:${port}/`,
    `http://[::ffff:127.0.0.1]:${port}/`,
    `http://[::ffff:7f00:1]:${port}/`,
    `http://[0:0:0:0:0:ffff:127.0.0.1]:${port}/`,
    `http://[::1]:${port}/`,
    `http://0.0.0.0:${port}/`,
    `http://0:${port}/`,
    `http://localhost.:${port}/`,
    `http://LOCALHOST.:${port}/`,
    `http://169.254.169.254/latest/meta-data/`,
    `http://[fd00:ec2::254]/`,
    `http://100.100.100.200/`,
    `http://10.0.0.1/`,
    `http://192.168.1.1/`,
    `http://[fe80::1]/`,
    `http://[64:ff9b::7f00:1]:${port}/`,
    `${corpusBase}/redirect-to-canary`,
    `http://user:pass@127.0.0.1:${port}/`,
    `file:///etc/passwd`,
    `gopher://127.0.0.1:${port}/`,
    `ftp://127.0.0.1:${port}/`,
  ];
  for (const target of ssrf) {
    await judge('ssrf', target, await get(proxied(target, 'width=10')), { expect: 'error' });
    // a legacy URL is a 301 to the /p/ form: the target is judged where the redirect leads
    const legacy = await get(`/10x10/${target}`);
    const location = legacy.status === 301 ? legacy.headers.get('location') : null;
    await judge(
      'ssrf',
      `legacy ${target}`,
      location ? await get(new URL(location, base).pathname + new URL(location, base).search) : legacy,
      { expect: 'error' },
    );
  }

  const image = corpus.find((entry) => entry.name === 'exif-orientation-1')?.body || Buffer.alloc(0);
  const digest = challengeHash().update(image).digest();
  const signed = hiveSignature(digest, hiveKey);
  const tamper = (/** @type {number} */ at) => {
    const copy = Buffer.from(signed);
    copy[at] ^= 0x01;
    return copy.toString('hex');
  };
  for (const [label, signature] of [
    ['flipped r', tamper(5)],
    ['flipped s', tamper(40)],
    ['bad recovery byte', `00${signed.subarray(1).toString('hex')}`],
    ['short', signed.toString('hex').slice(0, 128)],
    ['not hex', 'zz'.repeat(65)],
    ['empty-ish', '0'.repeat(130)],
  ]) {
    const form = new FormData();
    form.append('image_file', new Blob([new Uint8Array(image)]), 'x.jpg');
    await judge('signature tampering', label, await get(`/${account}/${signature}`, { method: 'POST', body: form }), {
      expect: 'error',
    });
  }
  const body = JSON.stringify({ account });
  const timestamp = String(Math.floor(Date.now() / 1000));
  const mac = sign(hmacKey, timestamp, Buffer.from(body));
  const hook = (/** @type {string} */ sent, /** @type {Record<string, string>} */ headers) =>
    get('/hooks/avatar', { method: 'POST', body: sent, headers: { 'content-type': 'application/json', ...headers } });
  for (const [label, sent, headers] of /** @type {Array<[string, string, Record<string, string>]>} */ ([
    ['no signature', body, { 'x-timestamp': timestamp }],
    [
      'flipped body',
      body.replace(account, `${account.slice(0, -1)}x`),
      { 'x-timestamp': timestamp, 'x-signature': `sha256=${mac}` },
    ],
    [
      'flipped mac',
      body,
      { 'x-timestamp': timestamp, 'x-signature': `sha256=${mac.replace(/^./, (c) => (c === '0' ? '1' : '0'))}` },
    ],
    ['moved timestamp', body, { 'x-timestamp': String(Number(timestamp) + 1), 'x-signature': `sha256=${mac}` }],
    [
      'old timestamp',
      body,
      {
        'x-timestamp': String(Number(timestamp) - 86400),
        'x-signature': `sha256=${sign(hmacKey, String(Number(timestamp) - 86400), Buffer.from(body))}`,
      },
    ],
    ['sha1 label', body, { 'x-timestamp': timestamp, 'x-signature': `sha1=${mac}` }],
    ['huge body', 'x'.repeat(100_000), { 'x-timestamp': timestamp, 'x-signature': `sha256=${mac}` }],
  ])) {
    await judge('hmac tampering', label, await hook(sent, headers), { expect: 'error' });
  }
  return classes;
}

/** A stack and its stand-ins ready for the campaign: canary, corpus site (as "localhost"), a Hive node with the account. */
export async function startCampaign() {
  const { startStack } = await import('../test/support/stack.js');
  const { startHiveNode } = await import('../test/support/hive-node.js');
  const key = secp256k1.keygen();
  const canary = await startCanary();
  const corpus = await buildCorpus();
  const site = await startCorpusServer(corpus, canary.port);
  const hive = await startHiveNode();
  const authority = keyAuthority(key.publicKey);
  hive.setAccount({
    name: 'campaign',
    posting: authority,
    active: authority,
    json_metadata: '',
    posting_json_metadata: '',
  });
  const stack = await startStack({
    UPLOAD_TOKENS: 'campaign',
    PURGE_HMAC_KEYS: 'campaign-key',
    HIVE_API_URLS: hive.url,
    LOG_LEVEL: 'warn',
    FETCH_ALLOW_PRIVATE_HOSTS: 'localhost',
    NGINX_RATE_LIMIT: '100000',
    NGINX_RATE_BURST: '100000',
    VARNISH_MISS_LIMIT: '0',
  });
  return {
    stack,
    canary,
    run: () =>
      runCampaign({
        base: stack.base,
        corpus,
        corpusBase: site.base,
        canaryPort: canary.port,
        uploadToken: 'campaign',
        hmacKey: 'campaign-key',
        hiveKey: key.secretKey,
        account: 'campaign',
        direct: {
          // undici's own Response, read as the global one is
          haproxy: (path, init) => /** @type {any} */ (stack.direct('images', path, /** @type {any} */ (init))),
          origin: (path, init) => /** @type {any} */ (stack.direct('origin', path, /** @type {any} */ (init))),
        },
      }),
    async stop() {
      await stack.stop();
      await Promise.all([canary.close(), site.close(), hive.close()]);
    },
  };
}

export async function benchBadInput() {
  const campaign = await startCampaign();
  try {
    const classes = await campaign.run();
    const rows = Object.entries(classes).map(([name, entry]) => [
      name,
      entry.cases,
      entry.images,
      entry.errors4xx,
      entry.problems.length,
    ]);
    return {
      classes,
      canaryHits: campaign.canary.hits(),
      sections: [
        {
          heading:
            'Bad-input campaign (expectation: a 4xx JSON error or a correct image; never a 5xx, a crash or a forbidden request)',
          text: `Requests that reached the canary (forbidden addresses): ${campaign.canary.hits()}.`,
          table: { columns: ['class', 'cases', 'correct images', '4xx JSON errors', 'problems'], rows },
        },
      ],
    };
  } finally {
    await campaign.stop();
  }
}
