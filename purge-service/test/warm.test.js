// What the warmer reads out of a post (#41): the images a frontend will show, in the order it asks for
// them, each once; and the edge URLs it asks for each, as condenser and ecency build them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { base58Url } from '@stack/lib';
import { imagesOf, warmUrl } from '../src/warm/posts.js';

test("json_metadata.image first, then the body's markdown, <img> and bare image links, each once", () => {
  const body = [
    'Intro ![alt](https://img.example/b.jpg "title") and text',
    '<p><img class="x" src="https://img.example/c.png" /></p>',
    'A bare link: https://img.example/d.webp?size=2 and a page https://example.com/page.html',
    'Again ![](https://img.example/a.jpg) and [a link](https://example.com/not-an-image)',
    'javascript: ![x](javascript:alert(1)) and ftp ![y](ftp://host/e.jpg)',
  ].join('\n');
  const urls = imagesOf({
    body,
    json_metadata: JSON.stringify({ image: ['https://img.example/a.jpg', 42, 'not a url'], tags: ['x'] }),
  });
  assert.deepEqual(urls, [
    'https://img.example/a.jpg',
    'https://img.example/b.jpg',
    'https://img.example/c.png',
    'https://img.example/d.webp?size=2',
  ]);
});

test("metadata that is not JSON, an empty body, an edit's patch: no crash, the URLs it names", () => {
  assert.deepEqual(imagesOf({ body: '', json_metadata: '{not json' }), []);
  assert.deepEqual(imagesOf({}), []);
  const patch = '@@ -1,3 +1,40 @@\n-old\n+![new](https://img.example/new.jpg)\n';
  assert.deepEqual(imagesOf({ body: patch, json_metadata: '' }), ['https://img.example/new.jpg']);
});

test("the warm URLs are the frontends': the legacy path with the URL as it is, /p/ with it encoded", () => {
  const url = 'https://img.example/a b.jpg';
  assert.equal(
    warmUrl('http://127.0.0.1:8080', '/768x0/{url}', 'https://img.example/a.jpg'),
    'http://127.0.0.1:8080/768x0/https://img.example/a.jpg',
  );
  assert.equal(
    warmUrl('http://e', '/p/{base58}?format=match&mode=fit', url),
    `http://e/p/${base58Url.encode(url)}?format=match&mode=fit`,
  );
});
