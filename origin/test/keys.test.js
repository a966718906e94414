import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isAccountName } from '@stack/lib';
import { isUploadKey as isKey } from '@stack/lib';
import { keyOf } from '../src/keys.js';
import { isForbiddenAddress } from '../src/originals/ssrf.js';
import { checkTarget } from '../src/originals/fetch.js';

test('the Hive key of "hello world" is the known answer', () => {
  assert.equal(keyOf(Buffer.from('hello world')), 'DQmWQzjgaD82ozKv3hX3HmRmobw8RY3eMtvsG16GVkasFo3');
});

test('only base58 text of key length is a key: no dots, slashes or percent signs', () => {
  assert.ok(isKey('DQmWQzjgaD82ozKv3hX3HmRmobw8RY3eMtvsG16GVkasFo3'));
  for (const bad of [
    '..',
    '../../etc/passwd',
    'DQm%2e%2e',
    'favicon.ico',
    'DQmWQzjgaD82ozKv3hX3HmRmobw8RY3eMtvsG16GVkasFo0',
    '',
  ]) {
    assert.equal(isKey(bad), false, bad);
  }
});

test('account names follow Hive rules', () => {
  for (const good of ['alice', 'good-karma', 'hive.blog', 'abc', 'a12345678901234b'])
    assert.ok(isAccountName(good), good);
  for (const bad of ['al', 'Alice', '1abc', 'foo..bar', 'abc-', 'abcdefghijklmnopq', 'ab.cd', 'a_b', '../x'])
    assert.equal(isAccountName(bad), false, bad);
});

test('every non-public address is forbidden, in every spelling', () => {
  const forbidden = [
    '127.0.0.1',
    '10.0.0.1',
    '172.16.5.4',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '224.0.0.1',
    '0.0.0.0',
    '255.255.255.255',
    '::1',
    '::',
    '::ffff:127.0.0.1',
    '::ffff:a9fe:a9fe',
    'fe80::1',
    'fc00::1',
    'fd00:ec2::254',
    '64:ff9b::a9fe:a9fe',
    '2002:a9fe:a9fe::1',
    // IPv4-compatible (::a.b.c.d, deprecated), local-use NAT64, SIIT, Teredo, documentation, site-local
    '::127.0.0.1',
    '::7f00:1',
    '0:0:0:0:0:0:127.0.0.1',
    '::a9fe:a9fe',
    '::8.8.8.8',
    '64:ff9b:1::7f00:1',
    '::ffff:0:7f00:1',
    '2001:0:4136:e378:8000:63bf:3fff:fdd2',
    '2001:db8::1',
    'fec0::1',
    '100::1',
  ];
  for (const address of forbidden) assert.ok(isForbiddenAddress(address), address);
  for (const address of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111'])
    assert.equal(isForbiddenAddress(address), false, address);
});

test('URL checks refuse numeric spellings of loopback and metadata addresses before connecting', () => {
  const allowed = new Set();
  for (const url of [
    'http://0x7f.1/',
    'http://2130706433/',
    'http://017700000001/',
    'http://127.1/',
    'http://[::ffff:127.0.0.1]/',
    'http://0xa9.0xfe.0xa9.0xfe/latest/meta-data',
    'http://[fd00:ec2::254]/',
    'http://0/',
    'http://[::127.0.0.1]:8800/',
    'http://[::7f00:1]/',
  ]) {
    assert.throws(
      () => checkTarget(url, allowed),
      (/** @type {any} */ err) => err.status === 403,
      url,
    );
  }
  for (const url of [
    'file:///etc/passwd',
    'ftp://example.com/a.jpg',
    'gopher://x/',
    'http://user:pw@example.com/a.jpg',
    'not a url',
  ]) {
    assert.throws(
      () => checkTarget(url, allowed),
      (/** @type {any} */ err) => err.status === 400,
      url,
    );
  }
  assert.equal(checkTarget('https://example.com/a.jpg', allowed).hostname, 'example.com');
});
