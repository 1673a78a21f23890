"""The agents' policies, split by job (issue 16):

    sample.py      Sample (one completion), Messages, agent_name, answer_prefix_of
    agents.py      AgentsModule: the one nn.Module of all agents, in two shapes behind one interface
                   (LoraAgentsModule: adapters on one shared base; FullAgentsModule: a model per agent)
    loading.py     tokenizers, the module `agents.mode` names, EOS ids, frozen reference copies
    prompts.py     chat template, answer prefix, the cut of a history over model.max_prompt_tokens
    generation.py  batched HF generate with a shared prefill per prompt; cuts at EOS and stop strings
    logprobs.py    log-probs of packed completions, chunked over the output layer
    policies.py    AgentPolicies: what the trainer, engines and the local backend hold
"""

from comlrl.policy.agents import AgentsModule, FullAgentsModule, LoraAgentsModule
from comlrl.policy.generation import sample_counts
from comlrl.policy.packing import LOGIT_CHUNK_TOKENS, grouped_logprobs, hidden_to_logprobs, packed_hidden
from comlrl.policy.policies import AgentPolicies
from comlrl.tree.nodes import Messages, Sample, agent_name, answer_prefix_of

__all__ = [
    "LOGIT_CHUNK_TOKENS", "AgentPolicies", "AgentsModule", "FullAgentsModule", "LoraAgentsModule", "Messages",
    "Sample", "agent_name", "answer_prefix_of", "grouped_logprobs", "hidden_to_logprobs", "packed_hidden",
    "sample_counts",
]
