import assert from 'node:assert/strict';
import { test } from 'node:test';
import { threadsPerImage } from '../src/pipeline/index.js';

test('libvips threads per image: every core for a lone transform, one each once the transforms fill the cores', () => {
  assert.equal(threadsPerImage(1, 2), 2);
  assert.equal(threadsPerImage(2, 2), 1);
  assert.equal(threadsPerImage(4, 2), 1);
  assert.equal(threadsPerImage(3, 8), 2);
  assert.equal(threadsPerImage(1, 8), 8);
  assert.equal(threadsPerImage(0, 4), 4, 'never zero (sharp would read it as "the default")');
});
