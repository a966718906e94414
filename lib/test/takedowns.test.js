import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  base58Url,
  compileList,
  entryField,
  loadConfig,
  parseEntry,
  resolveSource,
  sharedSettings,
  takedownSettings,
  unwrapOptions,
} from '../src/index.js';

const unwrap = { ownHost: 'cdn.example', unwrapHosts: new Set(['images.hive.blog']) };
const KEY = 'DQmWQzjgaD82ozKv3hX3HmRmobw8RY3eMtvsG16GVkasFo3';

test('entries are kept in one form: URLs without scheme, query and fragment, proxies unwrapped, our uploads as keys', () => {
  assert.deepEqual(parseEntry('url', 'HTTPS://Img.Example/a/b.jpg?x=1#top', unwrap), {
    kind: 'url',
    value: 'img.example/a/b.jpg',
  });
  const wrapped = `https://images.hive.blog/p/${base58Url.encode('https://img.example/a/b.jpg?size=9')}?width=64`;
  assert.deepEqual(parseEntry('url', wrapped, unwrap), { kind: 'url', value: 'img.example/a/b.jpg' });
  assert.deepEqual(parseEntry('url', 'https://images.hive.blog/0x0/https://img.example/a/b.jpg', unwrap), {
    kind: 'url',
    value: 'img.example/a/b.jpg',
  });
  assert.deepEqual(parseEntry('url', `https://cdn.example/${KEY}/photo.jpg`, unwrap), { kind: 'key', value: KEY });
  assert.deepEqual(parseEntry('domain', '*.Bad.Example', unwrap), { kind: 'domain', value: 'bad.example' });
  assert.deepEqual(parseEntry('domain', 'https://bad.example/x', unwrap), { kind: 'domain', value: 'bad.example' });
  assert.deepEqual(parseEntry('account', '@alice', unwrap), { kind: 'account', value: 'alice' });
  for (const [kind, value] of [
    ['pattern', '(('],
    ['account', 'A'],
    ['key', 'no/slash'],
    ['domain', 'a b'],
    ['url', 'ftp://x/y'],
    ['nope', 'x'],
    ['url', ''],
    ['pattern', 'x'.repeat(501)],
  ]) {
    assert.throws(
      () => parseEntry(kind, value, unwrap),
      (/** @type {any} */ err) => err.status === 400 && err.name === 'invalid_takedown',
      `${kind} ${value.slice(0, 20)}`,
    );
  }
});

test('a compiled list blocks a URL in any spelling, a domain with its subdomains, patterns, keys and accounts', () => {
  const list = compileList([
    entryField({ kind: 'url', value: 'img.example/a/b.jpg' }),
    entryField({ kind: 'domain', value: 'bad.example' }),
    entryField({ kind: 'pattern', value: '/leak-\\d+\\.png$' }),
    entryField({ kind: 'key', value: KEY }),
    entryField({ kind: 'account', value: 'mallory' }),
  ]);
  assert.equal(list.source({ url: 'http://img.example/a/b.jpg?v=2' })?.kind, 'url');
  assert.equal(list.source({ url: 'https://img.example/a/c.jpg' }), null);
  assert.equal(list.source({ url: 'https://cdn.bad.example/x.png' })?.kind, 'domain');
  assert.equal(list.source({ url: 'https://notbad.example/x.png' }), null, 'a suffix that is not a subdomain');
  assert.equal(list.source({ url: 'https://ok.example/leak-12.png' })?.kind, 'pattern');
  assert.equal(list.source({ uploadKey: KEY })?.kind, 'key');
  assert.equal(list.account('mallory')?.kind, 'account');
  assert.equal(list.account('alice'), null);
});

test("an upstream image host's /<key>/<name> URLs (UPSTREAM_IMAGE_HOSTS) name uploads of this host", () => {
  const config = loadConfig([...sharedSettings, ...takedownSettings], {
    PUBLIC_URL: 'https://cdn.example',
    UPSTREAM_IMAGE_HOSTS: 'https://images.hive.blog/, http://old.example:8080',
  });
  assert.deepEqual(config.UPSTREAM_IMAGE_HOSTS, ['https://images.hive.blog', 'http://old.example:8080']);
  const options = unwrapOptions(config);
  assert.deepEqual(resolveSource(`https://images.hive.blog/${KEY}/photo.jpg`, options), { id: KEY, uploadKey: KEY });
  assert.deepEqual(resolveSource(`http://old.example:8080/${KEY}/x`, options), { id: KEY, uploadKey: KEY });
  assert.equal(
    resolveSource(`http://old.example:9999/${KEY}/x`, options).uploadKey,
    undefined,
    'another port is another host',
  );
  assert.equal(
    resolveSource(`https://steemitimages.com/${KEY}/x`, options).uploadKey,
    undefined,
    'an image proxy that is not an upstream',
  );
  assert.deepEqual(parseEntry('url', `https://images.hive.blog/${KEY}/photo.jpg`, options), {
    kind: 'key',
    value: KEY,
  });
  assert.throws(
    () => loadConfig(takedownSettings, { UPSTREAM_IMAGE_HOSTS: 'images.hive.blog' }),
    /UPSTREAM_IMAGE_HOSTS.*not an http\(s\) URL/,
  );
});
