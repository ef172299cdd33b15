import { useMemo } from 'react';
import { renderMarkdown } from '../lib/markdown';

/** Markdown rendered by marked and sanitised by DOMPurify (see lib/markdown.ts). */
export function Markdown({ text, className }: { text: string; className?: string }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  return <div className={`md${className ? ` ${className}` : ''}`} dangerouslySetInnerHTML={{ __html: html }} />;
}
