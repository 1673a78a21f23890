"""The two shapes of the agents' module answer the policy's questions themselves (pure logic, no model).

`AgentPolicies.generate` batches requests as `generation_groups` says: every request in one call on the
shared LoRA base, one call per agent (in agent order) with full models. Checked exhaustively over every
request list of up to 4 requests of 3 agents.
"""

from __future__ import annotations

import itertools

from torch import nn

from comlrl.policy import AgentsModule, FullAgentsModule, LoraAgentsModule

AGENTS = 3
REQUEST_LISTS = [list(agents) for n in range(5) for agents in itertools.product(range(AGENTS), repeat=n)]


def _no_reference(_device):
    raise AssertionError("the reference models are loaded only by a reference forward")


def test_both_shapes_are_agents_modules() -> None:
    full = FullAgentsModule([nn.Linear(2, 2) for _ in range(AGENTS)], _no_reference)
    lora = LoraAgentsModule(nn.Sequential(nn.Linear(2, 2)), AGENTS)
    assert isinstance(full, AgentsModule) and isinstance(lora, AgentsModule)


def test_lora_agents_generate_every_request_in_one_call() -> None:
    lora = LoraAgentsModule(nn.Sequential(nn.Linear(2, 2)), AGENTS)
    for agents in REQUEST_LISTS:
        assert lora.generation_groups(agents) == ([list(range(len(agents)))] if agents else []), agents


def test_full_agents_generate_one_call_per_agent_in_agent_order() -> None:
    full = FullAgentsModule([nn.Linear(2, 2) for _ in range(AGENTS)], _no_reference)
    for agents in REQUEST_LISTS:
        groups = full.generation_groups(agents)
        assert all(groups) and sorted(i for g in groups for i in g) == list(range(len(agents))), agents
        assert [agents[g[0]] for g in groups] == sorted(set(agents)), agents  # one call per agent, agent order
        for g in groups:
            assert g == sorted(g) and len({agents[i] for i in g}) == 1, agents  # request order, one agent


def test_full_agents_hold_no_reference_models_until_asked() -> None:
    """Frozen reference copies are loaded on the first KL forward, never as submodules of the trained module."""
    full = FullAgentsModule([nn.Linear(2, 2) for _ in range(AGENTS)], _no_reference)
    assert all(k.startswith("models.") for k in full.state_dict())
    assert [full.generation_model(a) for a in range(AGENTS)] == list(full.models)
    assert full.agent_parameters(1) == list(full.models[1].parameters())
