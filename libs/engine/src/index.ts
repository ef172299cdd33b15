/**
 * The engine's public surface: what other packages (services, tests, benches) import, named one
 * by one so that a module's helpers stay its own. A name another package needs is added here;
 * inside the engine, modules import each other directly.
 */
export { runAgentLoop, type LoopEvent, type LoopTool } from './agent/loop.js';
export { agentSystemPrompt, renderSystemPrompt } from './agent/prompt.js';
export { resolveTools } from './agent/tools.js';
export { definitionReferences, definitionRefusals, templatedAuthorityFields, type DefinitionReference } from './authority/definition.js';
export { AUTHORITY, chainSharing, enter, networkOpener, ownerIsAdmin, principalRole, refusal, subagentRefusal, timeOf, type Capability, type RunAuthority, type SubagentTarget } from './authority/policy.js';
export {
  compactionSettings,
  compactSessionNow,
  modelInfoFromDb,
  type ModelInfo,
} from './compaction/compaction.js';
export { estimateCallTokens, estimateTokens } from './compaction/tokens.js';
export { ChainCache, parseChain, type StoredChain } from './chain-cache.js';
export { createRuleMsg } from './chain/message.js';
export { renderTemplate } from './chain/placeholders.js';
export { CHAIN_DISABLED, ChainError, ChainRunner, type ChainRunOptions, type ChainTraceEntry } from './chain/runner.js';
export { chainToolFailure, chainToolInput, chainToolResult } from './chain/tool.js';
export { type ChainContext, type CompleteRequest, type LoadResult, type ParsedChain, type RuleMsg, type SubChainResult } from './chain/types.js';
export { holdsSecrets, isSecretHeader, isSecretKey, isSecretUrl, redactDefinition, sealDefinition, SEALED_PREFIX, sealStoredPlaintext, SECRET_MARKER, unsealDefinition, type SecretSealer } from './definition-secrets.js';
export { chainCategory, Id, normalizeRuleChain, RuleChainDsl, RuleChainInput, RuleChainUpdate, type NormalizedChain } from './dsl.js';
export { ADD_PROVIDER_FIX, ModelProviders } from './models/providers.js';
export { defaultModelOf, resolveModel } from './models/resolve.js';
export { type ChatMessage, type ModelCallRequest, type ModelEvent, type ModelTimeouts, type ToolCall } from './models/types.js';
export { nodeTypes } from './nodes/index.js';
export { KeyedLimiter } from './chain/limiter.js';
export { defineNodeType } from './nodes/types.js';
export { agentNode, buildConversation } from './runs/execute/conversation.js';
export { retryWhileDbDown } from './runs/execute/db-retry.js';
export { type RunDeps, type RunMetrics, type RunReplies } from './runs/execute/deps.js';
export { runAgent } from './runs/execute/run-agent.js';
export { agentInstructions } from './runs/execute/system-prompt.js';
export { ScriptError, ScriptSandbox, type ScriptInput } from './sandbox/sandbox.js';
export { readSkillArchive } from './skills/archive.js';
export { activeSkills, skillsPromptBlock } from './skills/inject.js';
export { MAX_SKILL_BYTES, parseSkillMarkdown, SKILL_NAME_PATTERN, SkillFormatError } from './skills/markdown.js';
export { readZipDirectory } from './skills/zip.js';
export { agentTemplate, DEFAULT_SYSTEM_PROMPT, defaultWorkspaceFiles } from './template.js';
export { bwrapUnavailable } from './tools/builtin/bash.js';
export { htmlToText } from './tools/builtin/http-fetch.js';
export { builtinTools, defaultBuiltinToolNames } from './tools/builtin/index.js';
export { toolForms, toolList } from './tools/forms.js';
export { compileGlob, GlobSyntaxError } from './tools/glob-match.js';
export { AddressNotAllowedError, assertPublicAddress, nonPublicReason, policyLookup } from './tools/net-policy.js';
export { policyFetch } from './tools/policy-fetch.js';
export { ToolError, type SendMessageInput, type ToolContext, type ToolDefinition } from './tools/types.js';
export { validateRuleChain, type FieldValidation } from './validate.js';
export { ancestorPaths, baseName, normaliseWorkspacePath, parentPath } from './workspace-path.js';
export { McpToolConfig, type HeartbeatConfig } from './agent/config.js';
export { markSpanFailed, startChildSpan } from './tracing.js';
