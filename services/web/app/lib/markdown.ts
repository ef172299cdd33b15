import DOMPurify from 'dompurify';
import { Marked } from 'marked';

/**
 * Markdown to safe HTML: marked (GFM) then DOMPurify. Nothing in the result can run script or
 * make the page talk to another host: inline styles and forms are dropped, images are kept only
 * from this origin (or data:), and links open in a new tab without a referrer.
 */
const marked = new Marked({ gfm: true, breaks: true });

let hooked = false;
function hook(): void {
  if (hooked) return;
  hooked = true;
  DOMPurify.addHook('afterSanitizeAttributes', (node) => {
    if (node.tagName === 'A' && node.hasAttribute('href')) {
      node.setAttribute('target', '_blank');
      node.setAttribute('rel', 'noopener noreferrer');
    }
    if (node.tagName === 'IMG') {
      const src = node.getAttribute('src') ?? '';
      let allowed = src.startsWith('data:image/');
      try {
        allowed ||= new URL(src, window.location.href).origin === window.location.origin;
      } catch {
        allowed = false;
      }
      if (!allowed) {
        node.removeAttribute('src');
        node.setAttribute('title', `external image not loaded: ${src}`);
      }
    }
  });
}

export function renderMarkdown(text: string): string {
  hook();
  const html = marked.parse(text, { async: false });
  return DOMPurify.sanitize(html, {
    FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed'],
    FORBID_ATTR: ['style'],
  });
}
