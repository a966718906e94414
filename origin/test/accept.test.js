import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acceptClass } from '../src/options.js';

test('Accept is read with its q-values: a type listed with q=0 is refused', () => {
  const cases = {
    'image/avif,image/webp,image/apng,image/*,*/*;q=0.8': 'avif',
    'image/avif;q=0,image/webp': 'webp',
    'image/avif; q=0.0, image/webp;q=0, */*': '',
    'image/avif;q=0.5': 'avif',
    'IMAGE/AVIF': 'avif',
    'image/avifx,image/webpy': '',
    'image/webp;level=1;q=0.9': 'webp',
    '': '',
  };
  for (const [accept, expected] of Object.entries(cases)) assert.equal(acceptClass(accept), expected, accept);
});
