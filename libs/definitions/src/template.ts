import { AGENT_NODE_TYPE, type RuleChainDsl } from './dsl.js';
import { defaultBuiltinToolNames } from './tools/index.js';

/**
 * The agent template (`GET /agent-template`) and the files a new agent's workspace starts
 * with. The one place both are defined: the engine issue extends them (tools, prompts).
 */

export interface WorkspaceFile {
  path: string;
  content: string;
}

interface TemplateOptions {
  /** `models.default_provider`; left out of the node when empty. */
  defaultProvider: string;
  id?: string;
  name?: string;
}

export const DEFAULT_SYSTEM_PROMPT = [
  'You are a helpful assistant. Your workspace holds files you can read and write with your tools; AGENTS.md there describes you and your task:',
  '',
  '${include(AGENTS.md)}',
].join('\n');

/**
 * A complete, valid agent: one `ai/agent` node (the default provider, the default built-in
 * tools, a system prompt that includes AGENTS.md) followed by an `end` node.
 */
export function agentTemplate(opts: TemplateOptions): RuleChainDsl {
  return {
    ruleChain: {
      id: opts.id ?? 'new_agent',
      name: opts.name ?? 'New agent',
      root: true,
      additionalInfo: { category: 'agents', description: 'A new agent', icon: '🤖' },
    },
    metadata: {
      firstNodeIndex: 0,
      nodes: [
        {
          id: 'node_agent',
          type: AGENT_NODE_TYPE,
          name: 'Agent',
          configuration: {
            ...(opts.defaultProvider ? { provider: opts.defaultProvider } : {}),
            systemPrompt: DEFAULT_SYSTEM_PROMPT,
            maxStep: 50,
            maxToolOutputLength: 50_000,
            // The built-in tools that are not opt-in (bash and http_fetch are added by choice).
            tools: defaultBuiltinToolNames().map((name) => ({ type: 'builtin', name })),
          },
        },
        { id: 'node_end', type: 'end', name: 'End' },
      ],
      connections: [{ fromId: 'node_agent', toId: 'node_end', type: 'Success' }],
    },
  };
}

/** The files a new agent's workspace is seeded with. */
export function defaultWorkspaceFiles(dsl: RuleChainDsl): WorkspaceFile[] {
  const { id, name } = dsl.ruleChain;
  const description = dsl.ruleChain.additionalInfo?.description;
  const lines = [
    `# ${name}`,
    '',
    `Agent id: \`${id}\` (the \`model\` of a chat request to this agent).`,
    '',
    typeof description === 'string' && description ? description : 'Describe here what this agent is for.',
    '',
    '## Workspace',
    '',
    'This folder is the agent\'s own workspace. The agent reads and writes files here with its',
    `tools; operators manage them through \`/api/v1/agents/${id}/workspace\`. Keep notes, instructions`,
    'and anything the agent should remember between conversations in this folder.',
    '',
  ];
  return [{ path: 'AGENTS.md', content: lines.join('\n') }];
}
