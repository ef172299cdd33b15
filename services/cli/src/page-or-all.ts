import type { Context } from './context.js';

/** `--page` and `--size` of list commands that can show one page or everything. */
export interface PageOpts {
  page?: number;
  size?: number;
}

/**
 * One page of a list when `--page` or `--size` is given (page 1 when only the size is), else
 * every item: without either, a list shows it all rather than the server's first page.
 */
export async function pageOrAll<T>(
  ctx: Context,
  label: string,
  opts: PageOpts,
  list: {
    page(page: { page: number; size?: number }): Promise<{ data: T[] }>;
    all(): Promise<T[]>;
  },
): Promise<T[]> {
  if (opts.page === undefined && opts.size === undefined) return ctx.spin(label, () => list.all());
  return (await ctx.spin(label, () => list.page({ page: opts.page ?? 1, size: opts.size }))).data;
}
