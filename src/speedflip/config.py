"""Configuration: nested pydantic models, YAML presets, ``--set key=value`` overrides.

Every key is validated; an unknown key, a wrong type or a value out of range is a
:class:`ConfigError` whose message names the key, the bad value and what is allowed.
"""

from __future__ import annotations

import copy
import difflib
import getpass
import math
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from speedflip.registry import MECHANICS_SETTERS, REWARD_NAMES, STATE_SETTER_NAMES, check_setter_options


class ConfigError(ValueError):
    """A configuration that cannot be used; the message says what is wrong and how to fix it."""


MAX_LAYER_WIDTH = 65_536


def _non_finite(value: Any, path: str = "") -> str | None:
    """The path (``""`` for ``value`` itself) of the first NaN/Inf number inside ``value``, else None."""
    if isinstance(value, float) and not math.isfinite(value):
        return path
    items: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
        items = [(str(i), v) for i, v in enumerate(value)]
    for key, item in items:
        found = _non_finite(item, f"{path}.{key}" if path else key)
        if found is not None:
            return found
    return None


def _check_layers(v: list[int], example: str, allow_empty: bool = False) -> list[int]:
    if (not v and not allow_empty) or any(not 1 <= w <= MAX_LAYER_WIDTH for w in v):
        empty = "a list" if allow_empty else "a non-empty list"
        raise ValueError(
            f"layer sizes must be {empty} of positive integers (at most {MAX_LAYER_WIDTH} each), e.g. {example}"
        )
    return v


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    @field_validator("*", mode="after", check_fields=False)
    @classmethod
    def _finite_numbers(cls, v: Any, info: ValidationInfo) -> Any:
        """NaN and Inf are never valid settings (a NaN weight or rate silently poisons training)."""
        if info.field_name == "env_kwargs":  # passed to gymnasium.make as they are
            return v
        where = _non_finite(v)
        if where is not None:
            inner = f" ('{where}' is {_non_finite_value(v, where)})" if where else ""
            raise ValueError(f"numbers must be finite, NaN and Inf are not allowed{inner}")
        return v


class ActionTableConfig(_Strict):
    """A lookup table built from bins (see :func:`speedflip.env.action_forms.build_table`)."""

    throttle: list[float] = Field(default_factory=lambda: [-1.0, 0.0, 1.0])
    steer: list[float] = Field(default_factory=lambda: [-1.0, -0.5, 0.0, 0.5, 1.0])
    torque: list[float] = Field(default_factory=lambda: [-1.0, 0.0, 1.0], description="pitch/yaw/roll bins")
    flips: bool = True
    stalls: bool = False

    @field_validator("throttle", "steer", "torque")
    @classmethod
    def _bins(cls, v: list[float]) -> list[float]:
        if not v or any(not -1.0 <= x <= 1.0 for x in v) or 0.0 not in v:
            raise ValueError("bins must be values in [-1, 1] and include 0 (the neutral control)")
        return sorted(set(v))


class RewardPhase(_Strict):
    """A named reward weight set; the next phase starts at ``until_steps`` or when ``until_metric``
    (a metrics.jsonl key such as ``charts/touches_per_minute``) reaches ``until_value``."""

    name: str = Field(min_length=1)
    rewards: dict[str, float]
    until_steps: int | None = Field(None, ge=1)
    until_metric: str | None = None
    until_value: float | None = None

    @field_validator("rewards")
    @classmethod
    def _known(cls, v: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(v) - set(REWARD_NAMES))
        if unknown:
            raise ValueError(f"unknown reward component(s) {unknown}; available: {sorted(REWARD_NAMES)}")
        return v

    @model_validator(mode="after")
    def _metric_pair(self) -> RewardPhase:
        if (self.until_metric is None) != (self.until_value is None):
            raise ValueError("until_metric and until_value go together")
        return self


class EnvConfig(_Strict):
    """The Rocket League environment."""

    num_arenas: int = Field(16, ge=1, le=4096, description="arenas simulated by each collector")
    blue_size: int = Field(1, ge=1, le=3, description="cars on the blue team")
    orange_size: int = Field(1, ge=0, le=3, description="cars on the orange team")
    tick_skip: int = Field(8, ge=1, le=120, description="physics ticks (1/120 s) per decision")
    obs_team_size: int = Field(
        0,
        ge=0,
        le=3,
        description="team size the observation is padded to; 0 = the larger team here. Set it "
        "to keep the observation size fixed across curriculum stages",
    )
    action_delay_ticks: int = Field(1, ge=0, le=1, description="1 = RLBot's one-tick action delay")
    timeout_seconds: float = Field(300.0, gt=0, description="episode length limit in game seconds")
    no_touch_timeout_seconds: float = Field(30.0, gt=0, description="truncate after this long without a touch")
    state_setters: dict[str, float] = Field(
        default_factory=lambda: {"kickoff": 0.5, "random": 0.5},
        description="how episodes start: setter name -> relative weight",
    )
    state_setter_options: dict[str, dict[str, float | bool]] = Field(
        default_factory=dict,
        description="options per state setter (its keyword parameters), e.g. {random: {cars_on_ground: true, "
        "ball_max_speed: 1000}}; they apply wherever the setter is used (main mix and mechanics lane)",
    )
    mechanics_share: float = Field(
        0.0,
        ge=0,
        le=1,
        description="share of arenas in the mechanics lane (floor(num_arenas * share), spread over the arena "
        "indices); they start from `mechanics_setters` instead of `state_setters` once the lane is active",
    )
    mechanics_setters: dict[str, float] = Field(
        default_factory=lambda: dict.fromkeys(MECHANICS_SETTERS, 1.0),
        description="the mechanics lane's mix: setter name -> relative weight",
    )
    mechanics_from_phase: int = Field(
        0, ge=0, description="reward phase index (0 = the first) from which the mechanics lane is active"
    )
    rewards: dict[str, float] = Field(
        default_factory=lambda: {
            "goal": 10.0,
            "touch": 1.0,
            "velocity_player_to_ball": 0.05,
            "velocity_ball_to_goal": 0.5,
            "face_ball": 0.02,
        },
        description="reward component name -> weight",
    )
    obs_builder: Literal["default", "advanced"] = Field(
        "default", description="default: compact world-frame obs; advanced: adds car-relative frames and pad timers"
    )
    frame_stack: int = Field(1, ge=1, le=4, description="observations of the last N steps, concatenated")
    nearest_pads: int = Field(4, ge=0, le=34, description="advanced obs: boost pads nearest to car and to ball")
    shuffle_slots: bool = Field(False, description="advanced obs: shuffle teammate/opponent slots every step")
    action_form: Literal["table", "continuous", "multi_discrete"] = Field(
        "table", description="table: lookup-table index; continuous: 8 raw controls; multi_discrete: per-control bins"
    )
    action_table: ActionTableConfig | None = Field(None, description="build the lookup table from bins instead")
    action_bins: int = Field(5, ge=2, le=11, description="multi_discrete: bins per analog control")
    sticky_buttons_steps: int = Field(
        0, ge=0, le=16, description="a pressed jump/boost/handbrake stays held this many steps (0 or 1 = off)"
    )
    action_masking: bool = Field(False, description="table form: mask actions that cannot act in the state")
    reward_mode: Literal["sparse", "dense", "hybrid"] = Field(
        "hybrid", description="sparse: event components only; dense: shaping only; hybrid: both"
    )
    sparse_scale: float = Field(1.0, ge=0, description="multiplies event-component weights (hybrid/sparse)")
    dense_scale: float = Field(1.0, ge=0, description="multiplies shaping-component weights (hybrid/dense)")
    team_spirit: float = Field(0.0, ge=0, le=1, description="share of a car's reward pooled with its team")
    opponent_scale: float = Field(0.0, ge=0, le=1, description="subtract this times the opponents' mean reward")
    reward_phases: list[RewardPhase] = Field(
        default_factory=list, description="named weight sets used in order instead of `rewards` (see docs)"
    )
    meshes_dir: str | None = Field(None, description="folder with soccar/mesh_*.cmf; default: rlgym's")
    rlgym: str | None = Field(
        None,
        description="'package.module:function' or 'path/to/file.py:function' returning an RLGym v2 env; one copy "
        "per arena replaces speedflip's own obs/actions/rewards/states (the slower per-env Python path; "
        "blue_size/orange_size must match the env)",
    )

    @field_validator("rewards")
    @classmethod
    def _known_rewards(cls, v: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(v) - set(REWARD_NAMES))
        if unknown:
            raise ValueError(f"unknown reward component(s) {unknown}; available: {sorted(REWARD_NAMES)}")
        return v

    @field_validator("state_setters", "mechanics_setters")
    @classmethod
    def _known_setters(cls, v: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(v) - set(STATE_SETTER_NAMES))
        if unknown:
            raise ValueError(f"unknown state setter(s) {unknown}; available: {sorted(STATE_SETTER_NAMES)}")
        if any(w < 0 for w in v.values()) or not any(w > 0 for w in v.values()):
            raise ValueError("state setter weights must be >= 0 with at least one > 0")
        return v

    @field_validator("state_setter_options")
    @classmethod
    def _setter_options(cls, v: dict[str, dict[str, float | bool]]) -> dict[str, dict[str, float | bool]]:
        check_setter_options(v)
        return v

    @field_validator("reward_phases")
    @classmethod
    def _phases_advance(cls, v: list[RewardPhase]) -> list[RewardPhase]:
        for phase in v[:-1]:
            if phase.until_steps is None and phase.until_metric is None:
                raise ValueError(
                    f"reward phase '{phase.name}' is not the last one but has no until_steps or until_metric: "
                    "the phases after it would never start"
                )
        return v

    @model_validator(mode="after")
    def _mechanics_phase_exists(self) -> EnvConfig:
        phases = len(self.reward_phases)
        if self.mechanics_share > 0 and self.mechanics_from_phase > 0 and self.mechanics_from_phase >= phases:
            raise ValueError(
                f"mechanics_from_phase {self.mechanics_from_phase} needs at least {self.mechanics_from_phase + 1} "
                f"reward_phases (counted from 0), there are {phases}: the mechanics lane would never start"
            )
        return self

    @property
    def num_cars(self) -> int:
        return self.blue_size + self.orange_size

    @property
    def num_agents(self) -> int:
        return self.num_arenas * self.num_cars


class PPOConfig(_Strict):
    """Proximal Policy Optimization."""

    num_steps: int = Field(128, ge=1, description="steps per agent per rollout")
    minibatch_size: int = Field(4096, ge=1, description="samples per gradient step")
    update_epochs: int = Field(3, ge=1, le=100)
    learning_rate: float = Field(3e-4, gt=0, le=1)
    anneal_lr: bool = Field(
        False,
        description="linearly decay the learning rate to 0 at the end of the run (run.total_steps, or "
        "run.time_budget_minutes when that comes first)",
    )
    anneal_lr_start: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="with anneal_lr: the share of the run (0..1, by the same steps or time budget) at which the linear "
        "decay to 0 begins; the rate is ppo.learning_rate until then (0 = decay over the whole run)",
    )
    lr_target_kl: float | None = Field(
        None, gt=0,
        description="adapt the learning rate after every update to keep its mean approximate KL near this: "
        "x1.5 below half of it, /1.5 above twice it, within learning_rate_min..learning_rate_max (None = off)",
    )  # fmt: skip
    learning_rate_min: float = Field(1e-5, gt=0, le=1, description="lr_target_kl: the lowest learning rate")
    learning_rate_max: float = Field(3e-3, gt=0, le=1, description="lr_target_kl: the highest learning rate")
    gamma: float = Field(0.99, gt=0, le=1)
    gae_lambda: float = Field(0.95, ge=0, le=1)
    clip_coef: float = Field(0.2, gt=0)
    clip_vloss: bool = False
    ent_coef: float = Field(0.01, ge=0)
    ent_coef_final: float | None = Field(
        None,
        ge=-1,
        description="decay the entropy bonus linearly from ent_coef to this (None = constant); below 0 the "
        "bonus becomes a price on entropy past the point where the line crosses 0: a sharper policy, so that the "
        "bot played by sampling plays closer to its argmax",
    )
    ent_coef_decay_steps: int | None = Field(
        None,
        ge=1,
        description="agent steps over which ent_coef reaches ent_coef_final (None = over the whole run: "
        "run.total_steps, or run.time_budget_minutes when that comes first)",
    )
    ent_coef_decay_fraction: float | None = Field(
        None,
        gt=0,
        le=1,
        description="the entropy decay also ends at this share of the run (run.time_budget_minutes, or "
        "run.total_steps when that comes first), if before ppo.ent_coef_decay_steps: on a slower machine the same "
        "minutes buy fewer steps, and the decay ends at whichever comes first (None = ent_coef_decay_steps alone)",
    )
    vf_coef: float = Field(0.5, ge=0)
    kickstart_coef: float = Field(
        0.0, ge=0,
        description="kickstarting from the rule bot: weight of the cross-entropy between the policy and the rule "
        "bot's action on the learner's own states, added to the PPO loss; constant, or decaying linearly to 0 over "
        "ppo.kickstart_steps and/or ppo.kickstart_fraction (0 = off; Rocket League feed-forward PPO on the lookup "
        "table)",
    )  # fmt: skip
    kickstart_steps: int | None = Field(
        None, ge=1, description="agent steps over which ppo.kickstart_coef decays linearly to 0 (None = constant)"
    )
    kickstart_fraction: float | None = Field(
        None,
        gt=0,
        le=1,
        description="the kickstart's weight also reaches 0 at this share of the run (run.time_budget_minutes, or "
        "run.total_steps when that comes first), if before ppo.kickstart_steps: on a slower machine the same minutes "
        "buy fewer steps, and the fade ends at whichever comes first (None = ppo.kickstart_steps alone)",
    )
    release_kl_coef: float = Field(
        0.0, ge=0,
        description="once the kickstart's weight reaches 0 (ppo.kickstart_steps or ppo.kickstart_fraction), the "
        "weight of KL(the policy as it was then || the policy) on the learner's states, added to the PPO loss: the "
        "released policy is held near the clone it was, by how far it moved, instead of toward the rule bot's one "
        "row (0 = off)",
    )  # fmt: skip
    bootstrap_through_goals: bool = Field(
        False,
        description="GAE treats a goal as play going on (Rocket League): the value after a goal is the value of the "
        "kickoff that follows, as in a match, instead of 0. With a goal as the end of the agent's future, scoring "
        "forfeits the shaping rewards that would have followed and conceding adds that loss to the goal's penalty, "
        "so the agent is paid less to score than to keep the ball out (docs/learning.md, twentieth session). Off by "
        "default: its one 30-minute 1v1 run scored fewer goals in training, not more (twenty-first session, H11)",
    )
    mirror_augment: Literal["none", "both", "random"] = Field(
        "none",
        description="train on the field's left-right mirror of the rollout's rows (x -> -x: the mirrored "
        "observation, the row with steer, yaw and roll negated, the same advantage and return). 'both': every row "
        "and its mirror, each minibatch twice the rows (about 1.5x the time per agent step, measured); 'random': "
        "each row replaced by its mirror with probability 1/2 (no extra cost); 'none': off. Rocket League with "
        "speedflip's own observation builders and the lookup table only (docs/learning.md, fifty-fourth session)",
    )
    mirror_coef: float = Field(
        0.0, ge=0,
        description="weight of a symmetry loss added to PPO's: the mean KL(pi(.|s) || pi(mirror(.)|mirror(s))) over "
        "each minibatch's states, the policy against its own left-right mirror (0 for a mirror-symmetric policy; "
        "one more policy pass per minibatch on the mirrored states). Rocket League with speedflip's own observation "
        "builders and the lookup table only (0 = off; docs/learning.md, fifty-fourth session)",
    )  # fmt: skip
    max_grad_norm: float = Field(0.5, gt=0)
    norm_adv: bool = True
    target_kl: float | None = Field(None, gt=0, description="stop the epochs early above this KL")
    normalize_obs: bool = True
    normalize_rewards: bool = Field(True, description="scale rewards by the std of the discounted return")
    policy_layers: list[int] = Field(default_factory=lambda: [256, 256])
    critic_layers: list[int] = Field(default_factory=lambda: [256, 256])

    @field_validator("policy_layers", "critic_layers")
    @classmethod
    def _layers(cls, v: list[int]) -> list[int]:
        return _check_layers(v, "[256, 256]")

    @property
    def uses_mirror(self) -> bool:
        """Whether training needs the game's left-right mirror (``mirror_augment`` or ``mirror_coef``)."""
        return self.mirror_augment != "none" or self.mirror_coef > 0

    @model_validator(mode="after")
    def _lr_schedule(self) -> PPOConfig:
        if self.lr_target_kl is not None and self.anneal_lr:
            raise ValueError(
                "ppo.anneal_lr and ppo.lr_target_kl both set the learning rate; keep one (set ppo.anneal_lr=false "
                "or ppo.lr_target_kl=null)"
            )
        if self.anneal_lr_start > 0 and not self.anneal_lr:
            raise ValueError(
                f"ppo.anneal_lr_start ({self.anneal_lr_start}) only shapes ppo.anneal_lr, which is off; set "
                "ppo.anneal_lr=true or ppo.anneal_lr_start=0"
            )
        if self.learning_rate_min > self.learning_rate_max:
            raise ValueError(
                f"ppo.learning_rate_min ({self.learning_rate_min}) is above ppo.learning_rate_max "
                f"({self.learning_rate_max}); swap them"
            )
        return self


class RunConfig(_Strict):
    """The run: budget, checkpoints, logging, device."""

    total_steps: int = Field(5_000_000, ge=1, description="agent steps to train for")
    time_budget_minutes: float | None = Field(
        None,
        gt=0,
        le=10_000_000,
        description="also stop after this many wall-clock minutes of training (earlier sessions of a resumed run "
        "included); the run ends at whichever of this and run.total_steps comes first, and schedules over the "
        "run's length (ppo.anneal_lr, an entropy decay without ppo.ent_coef_decay_steps) follow the same end "
        "(None = steps only)",
    )
    checkpoint_interval_steps: int = Field(250_000, ge=1, description="agent steps between checkpoints")
    keep_checkpoints: int = Field(5, ge=1, description="rolling checkpoints kept (newest)")
    seed: int = Field(0, ge=0, le=2**32 - 1)
    device: str = Field("auto", pattern=r"^(auto|cpu|cuda(:\d+)?)$")
    num_threads: int = Field(0, ge=0, description="physics threads; 0 = one per CPU core")
    torch_threads: int = Field(0, ge=0, description="torch intra-op threads; 0 = half the CPU cores (at least 1)")
    update_torch_threads: int = Field(
        0,
        ge=0,
        description="torch threads during a Rocket League PPO update (collection keeps run.torch_threads); "
        "0 = every CPU core. Ignored with run.overlap_collection (both run at once)",
    )
    collector: Literal["auto", "inprocess", "multiprocess", "pipelined", "ray"] = Field(
        "auto",
        description="rollout collection backend: 'inprocess' (physics threads in this process), "
        "'multiprocess' (worker processes over shared memory), 'pipelined' (worker processes in two groups: "
        "this process acts for one while the other simulates; feed-forward policies, lookup-table actions), "
        "'ray' (Ray actors on this machine or a "
        "cluster, pip install 'speedflip[ray]'; docs/distributed.md), 'auto' (inprocess below 4 CPU "
        "cores, multiprocess from 4; see docs/performance.md)",
    )
    ray_address: str = Field(
        "",
        pattern=r"^(auto|[A-Za-z0-9._\-]+:[0-9]{1,5})?$",
        description="run.collector=ray: the cluster to join: 'auto' (the one `ray start` runs on this machine), "
        "'host:port' of its head, or '' (a private local cluster for this run only)",
    )
    ray_actors: int = Field(
        2, ge=1, le=4096, description="run.collector=ray: actors, each with env.num_arenas arenas and a CPU policy copy"
    )
    ray_cpus_per_actor: float = Field(
        1.0, gt=0, le=1024, description="run.collector=ray: CPUs Ray reserves per actor (its physics threads)"
    )
    max_policy_lag: int = Field(
        0,
        ge=0,
        le=1000,
        description="run.collector=ray: 0 = every actor collects with the newest weights and the learner trains "
        "on all their rollouts as one batch (no lag, no overlap); N >= 1 = each rollout is trained alone as it "
        "arrives, collection overlaps learning, and one acted by weights more than N updates old is dropped "
        "(health/dropped_stale_rollouts)",
    )
    ray_dashboard: bool = Field(
        False, description="run.collector=ray with a local cluster: start Ray's dashboard (off: docs/distributed.md)"
    )
    num_workers: int = Field(
        0,
        ge=0,
        description="worker processes of the multiprocess collector; 0 = auto (one per CPU core); of the pipelined "
        "collector, in all (split over its two groups; 0 = one per CPU core but one, per group)",
    )
    milestone_replays: bool = Field(True, description="record a 30 s replay vs the rule bot at every milestone")
    amp: bool = Field(
        False, description="mixed precision (torch.amp autocast + GradScaler) on CUDA; ignored with a note on CPU"
    )
    update_precision: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="the PPO update's matrix products: 'bfloat16' autocasts them (output layers and the loss stay "
        "float32), 'float32' does not; 'auto' = bfloat16 for feed-forward Rocket League PPO on a CPU with native "
        "bfloat16 instructions (AVX512-BF16 or AMX), float32 elsewhere (docs/performance.md)",
    )
    compile: bool = Field(False, description="torch.compile the network; falls back to eager with a note if it fails")
    overlap_collection: bool = Field(
        False,
        description="collect the next rollout while the PPO update runs (one policy version behind; "
        "the version lag is logged as perf/policy_lag)",
    )
    worker_timeout_seconds: float = Field(
        60.0, gt=0, description="a collection worker silent this long is declared hung and restarted"
    )
    max_worker_restarts: int = Field(
        5, ge=0, description="worker restarts allowed within restart_window_seconds before the run stops"
    )
    restart_window_seconds: float = Field(600.0, gt=0, description="window for max_worker_restarts")
    max_nonfinite_updates: int = Field(
        3, ge=1, description="updates in a row with NaN/Inf loss or gradients before the last good weights are restored"
    )
    max_nonfinite_restores: int = Field(
        3, ge=1, description="restores of the last good weights in a row before the run stops with a diagnosis"
    )
    owner: str = Field(default_factory=lambda: _os_user(), min_length=1)
    tensorboard: bool = True

    @model_validator(mode="after")
    def _one_precision(self) -> RunConfig:
        if self.amp and self.update_precision == "bfloat16":
            raise ValueError(
                "run.amp (float16 with a gradient scaler, CUDA) and run.update_precision=bfloat16 both choose the "
                "update's precision; keep one (set run.amp=false or run.update_precision=auto)"
            )
        return self


class SelfPlayConfig(_Strict):
    """Opponents: pure self-play, a pool of frozen snapshots and the rule bot, ratings, evaluation."""

    opponent_share: float = Field(
        0.0, ge=0.0, le=1.0, description="share of arenas where the learner plays a pool opponent (0 = pure self-play)"
    )
    snapshot_interval_steps: int = Field(
        1_000_000, ge=1, description="agent steps between milestones (full snapshots that join the pool)"
    )
    pool_size: int = Field(8, ge=1, description="snapshots kept in the pool (the rule bot comes on top)")
    include_rule: bool = Field(True, description="the rule-based bot is a pool member")
    rule_share: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="fixed share of pool games against the rule bot, the rest among snapshots by `sampling` "
        "(unset: the rule bot is sampled like any member, which elo_weighted makes rare once milestones exist)",
    )
    idle_share: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="fixed share of pool games against the idle car, which never touches its controls: an "
        "open-net drill where every goal conceded is the learner's own (0 = the idle car is not in the pool)",
    )
    rule_noise: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="share of the rule bot's decisions in pool games spent on random excursions: a uniformly random "
        "lookup-table row held for `rule_noise_hold_steps` env steps, so the learner meets a less predictable rule "
        "bot (0 = the rule bot as it is; its evaluations, ratings and kickstart labels are never noisy)",
    )
    rule_noise_hold_steps: int = Field(
        8, ge=1, description="env steps (decisions) one random excursion of the noisy rule bot lasts"
    )
    sampling: Literal["uniform", "elo_weighted", "recent_weighted", "difficulty_adjusted"] = "elo_weighted"
    temperature: float = Field(100.0, gt=0, description="softness of the sampling weights (Elo points)")
    elo_window: float = Field(400.0, gt=0, description="elo_weighted: prefer opponents within this Elo gap")
    target_win_rate: float = Field(0.6, gt=0, lt=1, description="difficulty_adjusted: aim for this win rate")
    min_elo_diff: float = Field(400.0, gt=0, description="prune snapshots rated this far below the learner")
    k_factor: float = Field(16.0, gt=0, description="Elo K factor for training and evaluation games")
    eval_interval_steps: int = Field(0, ge=0, description="evaluate vs the rule bot every N agent steps (0 = off)")
    eval_games: int = Field(8, ge=2, description="games per periodic evaluation")
    eval_game_seconds: float = Field(60.0, gt=0, description="simulated seconds per evaluation game")
    rate_milestones: bool = Field(
        True,
        description="rate every new milestone in short games vs the rule bot, the idle car and earlier milestones "
        "(selfplay/rating.py; table action forms only)",
    )
    rating_games: int = Field(
        8, ge=2, multiple_of=2, description="milestone rating: games per opponent (even: sides are swapped halfway)"
    )
    rating_game_seconds: float = Field(30.0, gt=0, description="milestone rating: simulated seconds per game")
    rating_opponents: int = Field(
        2, ge=0, description="milestone rating: earlier milestones played (1, 2, 4, ... milestones back)"
    )
    rating_prior_sd: float = Field(
        300.0, gt=0, description="milestone rating: sd (Elo) of the prior centred on the previous milestone's rating"
    )
    ship_margin: float = Field(
        0.1, ge=0.0, le=1.0,
        description="ship_by=anchor_score: a newer milestone is shipped when its anchor score is at least the "
        "stage's best so far minus this (about one standard deviation of a 16-game score), so the newest "
        "near-best milestone ships instead of an older lucky one (0 = only a higher score ships; docs/learning.md, "
        "twentieth session)",
    )  # fmt: skip
    ship_by: Literal["anchor_score", "elo"] = Field(
        "anchor_score",
        description="which rated milestone is the run's shipped bot (best.json): 'anchor_score' = the best score "
        "rate against the rule bot and the idle car in its rating games (Elo breaks ties), 'elo' = the highest "
        "Elo, which also counts games against earlier milestones (docs/learning.md, sixteenth session)",
    )
    ship_ensemble: int = Field(
        0, ge=0,
        description="the run's shipped bot (speedflip eval / export / watch RUN) is its last N milestones playing as "
        "one bot: the mean of their action probabilities, argmax as exported (RUN@lastN; docs/learning.md, "
        "thirty-eighth session); 0 or 1 = the best-rated milestone (best.json), also while the run has fewer than N",
    )  # fmt: skip
    final_pick_milestones: int = Field(
        0, ge=0,
        description="at the end of a run, the last N milestones of the current stage play "
        "selfplay.final_pick_games games against the rule bot and the idle car and the best of them becomes the "
        "shipped bot (best.json; 0 = off: the rating's pick stands; docs/learning.md, thirty-fourth session)",
    )  # fmt: skip
    final_pick_games: int = Field(
        32, ge=2, multiple_of=2, description="final pick: games per anchor and milestone (even: sides are swapped)"
    )
    final_pick_game_seconds: float = Field(60.0, gt=0, description="final pick: simulated seconds per game")
    final_pick_by: Literal["score", "own_goal_veto"] = Field(
        "score",
        description="final pick: 'score' = the best score rate against the rule bot and the idle car ships; "
        "'own_goal_veto' = the rating's shipped bot stays unless it scores an own goal against the idle car as "
        "exported, then the newest of the last milestones that scores none ships (docs/learning.md, fifty-eighth "
        "session)",
    )  # fmt: skip

    @model_validator(mode="after")
    def _rule_share_needs_the_rule_bot(self) -> SelfPlayConfig:
        if self.rule_share is not None and not self.include_rule:
            raise ValueError(
                f"rule_share={self.rule_share:g} needs the rule bot in the pool: set selfplay.include_rule=true "
                "or leave selfplay.rule_share unset"
            )
        return self

    @model_validator(mode="after")
    def _rule_noise_needs_the_rule_bot(self) -> SelfPlayConfig:
        if self.rule_noise > 0 and not self.include_rule:
            raise ValueError(
                f"rule_noise={self.rule_noise:g} needs the rule bot in the pool: set selfplay.include_rule=true "
                "or selfplay.rule_noise=0"
            )
        return self

    @model_validator(mode="after")
    def _fixed_shares_fit_in_the_pool(self) -> SelfPlayConfig:
        rule = self.rule_share or 0.0
        if rule + self.idle_share > 1.0:
            raise ValueError(
                f"rule_share={rule:g} and idle_share={self.idle_share:g} add up to more than all pool games: "
                "lower one so that they sum to at most 1"
            )
        return self


class StageConfig(_Strict):
    """One curriculum stage; the next stage starts when any of its ``until_*`` conditions holds."""

    name: str = Field(min_length=1)
    blue_size: int = Field(1, ge=1, le=3)
    orange_size: int = Field(1, ge=1, le=3)
    opponent_share: float = Field(0.0, ge=0.0, le=1.0, description="share of arenas against the pool")
    until_steps: int | None = Field(None, ge=1, description="advance at this global step")
    until_win_rate: float | None = Field(None, gt=0, le=1, description="advance at this win rate vs the pool")
    until_elo: float | None = Field(None, description="advance when the learner's Elo reaches this")


class GymConfig(_Strict):
    """A Gymnasium environment instead of Rocket League (``speedflip train --env gym:CartPole-v1``)."""

    env_id: str | None = Field(None, description="registered Gymnasium id, e.g. CartPole-v1; unset = Rocket League")
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="keyword arguments for gymnasium.make")
    num_envs: int = Field(8, ge=1, le=1024, description="environment copies stepped together (SyncVectorEnv)")
    eval_interval_steps: int = Field(
        10_000, ge=0, description="evaluate on separate env copies every N agent steps; the best is kept as best/"
    )
    eval_episodes: int = Field(10, ge=1, description="episodes per periodic evaluation")
    eval_envs: int = Field(4, ge=1, description="env copies the evaluation runs on")
    eval_deterministic: bool = Field(True, description="periodic evaluation takes the most likely action")
    log_interval_steps: int = Field(1_000, ge=1, description="DQN: agent steps between metric records")
    success: Literal["auto", "truncated", "terminated", "return"] = Field(
        "auto",
        description="what counts as a successful episode: 'truncated' (reached the time limit without failing, "
        "CartPole), 'terminated' (reached a goal state, MountainCar/Acrobot), 'return' (return >= "
        "success_return); 'auto' = 'return' when a threshold is known",
    )
    success_return: float | None = Field(None, description="'return' success threshold; unset = solved_return")
    solved_return: float | None = Field(
        None, description="mean return that counts as solved; unset = the env's registered reward_threshold"
    )
    random_return: float | None = Field(None, description="mean return of a random policy (for the verdict)")
    activation: Literal["relu", "tanh"] = Field(
        "relu", description="hidden-layer activation of the networks of Gymnasium runs (PPO, recurrent encoder, DQN)"
    )


class DQNConfig(_Strict):
    """Deep Q-learning for discrete action spaces (Gymnasium environments)."""

    learning_rate: float = Field(2.5e-4, gt=0, le=1)
    buffer_size: int = Field(100_000, ge=1, description="transitions kept in the replay buffer")
    batch_size: int = Field(128, ge=1, description="transitions per gradient step")
    gamma: float = Field(0.99, ge=0, le=1)
    tau: float = Field(1.0, gt=0, le=1, description="target update: 1 = hard copy, < 1 = soft (Polyak) update")
    target_update_interval: int = Field(500, ge=1, description="agent steps between target-network updates")
    start_epsilon: float = Field(1.0, ge=0, le=1)
    end_epsilon: float = Field(0.05, ge=0, le=1)
    exploration_fraction: float = Field(0.3, gt=0, le=1, description="share of total_steps epsilon decays over")
    learning_starts: int = Field(10_000, ge=0, description="agent steps of random play before the first update")
    train_frequency: int = Field(10, ge=1, description="agent steps between training rounds")
    gradient_steps: int = Field(1, ge=1, description="gradient steps per training round")
    double_dqn: bool = Field(False, description="choose next actions with the online net, value them with the target")
    max_grad_norm: float = Field(10.0, gt=0)
    loss: Literal["mse", "huber"] = Field("mse", description="TD loss: mean squared or Huber (smooth L1)")
    q_layers: list[int] = Field(default_factory=lambda: [120, 84])
    save_replay: bool = Field(True, description="store the replay buffer contents in checkpoints (safetensors)")

    @model_validator(mode="after")
    def _batch_fits_buffer(self) -> DQNConfig:
        if self.batch_size > self.buffer_size:
            raise ValueError(
                f"batch_size ({self.batch_size}) is larger than buffer_size ({self.buffer_size}): a batch could "
                "never be drawn; lower dqn.batch_size or raise dqn.buffer_size"
            )
        return self

    @field_validator("q_layers")
    @classmethod
    def _layers(cls, v: list[int]) -> list[int]:
        return _check_layers(v, "[120, 84]")


class RecurrentConfig(_Strict):
    """The recurrent core of ``algo: ppo_recurrent`` (truncated BPTT over sequences)."""

    cell: Literal["lstm", "gru"] = "lstm"
    hidden_size: int = Field(64, ge=1, le=4096)
    num_layers: int = Field(1, ge=1, le=8)
    sequence_length: int = Field(8, ge=1, description="steps per training sequence (BPTT length)")
    encoder_layers: list[int] = Field(default_factory=lambda: [64], description="MLP before the core; [] = none")
    head_layers: list[int] = Field(
        default_factory=lambda: [64],
        description="MLP heads over [core output, encoder features]; [] = one linear layer on the core output",
    )

    @field_validator("encoder_layers", "head_layers")
    @classmethod
    def _layers(cls, v: list[int]) -> list[int]:
        return _check_layers(v, "[64]", allow_empty=True)


def _default_stages() -> list[StageConfig]:
    return [
        StageConfig(name="1v1", blue_size=1, orange_size=1, opponent_share=0.0, until_steps=2_000_000),
        StageConfig(name="1v2", blue_size=1, orange_size=2, opponent_share=1.0, until_steps=3_500_000),
        StageConfig(name="2v2", blue_size=2, orange_size=2, opponent_share=0.0),
    ]


class CurriculumConfig(_Strict):
    """Stages of team sizes and opponents (default 1v1 self-play -> 1v2 vs the pool -> 2v2 self-play)."""

    enabled: bool = False
    stages: list[StageConfig] = Field(default_factory=_default_stages)

    @field_validator("stages")
    @classmethod
    def _stages(cls, v: list[StageConfig]) -> list[StageConfig]:
        if not v:
            raise ValueError("a curriculum needs at least one stage")
        for stage in v[:-1]:
            if stage.until_steps is None and stage.until_win_rate is None and stage.until_elo is None:
                raise ValueError(f"stage '{stage.name}' is not the last one but has no until_steps/win_rate/elo")
        steps = [s.until_steps for s in v if s.until_steps is not None]
        if steps != sorted(steps):
            raise ValueError("until_steps must increase from stage to stage")
        names = [s.name for s in v]
        if len(set(names)) != len(names):
            raise ValueError(f"stage names must be unique (milestones are kept per stage name), got {names}")
        return v


class Config(_Strict):
    """Everything a training run needs."""

    env: EnvConfig = Field(default_factory=lambda: EnvConfig())
    ppo: PPOConfig = Field(default_factory=lambda: PPOConfig())
    run: RunConfig = Field(default_factory=lambda: RunConfig())
    selfplay: SelfPlayConfig = Field(default_factory=lambda: SelfPlayConfig())
    curriculum: CurriculumConfig = Field(default_factory=lambda: CurriculumConfig())
    algo: Literal["ppo", "ppo_recurrent", "dqn"] = Field(
        "ppo", description="ppo, ppo_recurrent (LSTM/GRU core, see recurrent.*) or dqn (Gymnasium envs only)"
    )
    gym: GymConfig = Field(default_factory=lambda: GymConfig())
    dqn: DQNConfig = Field(default_factory=lambda: DQNConfig())
    recurrent: RecurrentConfig = Field(default_factory=lambda: RecurrentConfig())

    @model_validator(mode="after")
    def _batch_fits(self) -> Config:
        if self.gym.env_id is not None:
            return self._gym_batch_fits()
        if self.algo == "dqn":
            raise ValueError(
                "algo 'dqn' runs on Gymnasium environments only: set gym.env_id (e.g. --env gym:CartPole-v1); "
                "Rocket League runs use algo 'ppo' or 'ppo_recurrent'"
            )
        if self.algo == "ppo_recurrent":
            if self.ppo.num_steps % self.recurrent.sequence_length:
                raise ValueError(
                    f"ppo.num_steps ({self.ppo.num_steps}) must be a multiple of recurrent.sequence_length "
                    f"({self.recurrent.sequence_length}): rollouts are cut into whole sequences"
                )
            if self.env.action_form != "table" or self.env.action_masking:
                raise ValueError(
                    "algo 'ppo_recurrent' uses the lookup-table action form without masking: set "
                    "env.action_form=table and env.action_masking=false, or use algo 'ppo'"
                )
        batch = self.env.num_agents * self.ppo.num_steps
        if self.ppo.minibatch_size > batch:
            raise ValueError(
                f"ppo.minibatch_size ({self.ppo.minibatch_size}) is larger than the rollout batch "
                f"({batch} = env.num_arenas {self.env.num_arenas} x {self.env.num_cars} cars x "
                f"ppo.num_steps {self.ppo.num_steps}); lower ppo.minibatch_size or raise the others"
            )
        return self

    def _gym_batch_fits(self) -> Config:
        if self.algo == "dqn":
            return self
        batch = self.gym.num_envs * self.ppo.num_steps
        if self.ppo.minibatch_size > batch:
            raise ValueError(
                f"ppo.minibatch_size ({self.ppo.minibatch_size}) is larger than the rollout batch ({batch} = "
                f"gym.num_envs {self.gym.num_envs} x ppo.num_steps {self.ppo.num_steps}); lower "
                "ppo.minibatch_size or raise the others"
            )
        if self.algo == "ppo_recurrent" and self.ppo.num_steps % self.recurrent.sequence_length:
            raise ValueError(
                f"ppo.num_steps ({self.ppo.num_steps}) must be a multiple of recurrent.sequence_length "
                f"({self.recurrent.sequence_length}): rollouts are cut into whole sequences"
            )
        return self

    @model_validator(mode="after")
    def _forms_fit(self) -> Config:
        uses_pool = self.selfplay.opponent_share > 0 or (
            self.curriculum.enabled and any(s.opponent_share > 0 for s in self.curriculum.stages)
        )
        if self.env.action_form != "table" and uses_pool:
            raise ValueError(
                f"env.action_form={self.env.action_form} cannot play against the opponent pool yet (pool players "
                "pick lookup-table rows); use action_form=table or set selfplay.opponent_share=0"
            )
        if self.env.action_masking and self.env.action_form != "table":
            raise ValueError("env.action_masking applies to the lookup-table form only (action_form=table)")
        if self.ppo.kickstart_coef > 0:
            where = (
                "a Gymnasium environment" if self.gym.env_id is not None
                else f"algo={self.algo}" if self.algo != "ppo"
                else f"env.action_form={self.env.action_form}" if self.env.action_form != "table"
                else "env.action_masking=true (the rule bot may pick a masked row)" if self.env.action_masking
                else "env.rlgym (the RLGym adapter does not expose the arena state the rule bot reads)"
                if self.env.rlgym is not None else None
            )  # fmt: skip
            if where is not None:
                raise ValueError(
                    f"ppo.kickstart_coef={self.ppo.kickstart_coef:g} (kickstarting from the rule bot) needs "
                    f"feed-forward PPO on Rocket League's lookup table, not {where}; set ppo.kickstart_coef=0"
                )
        mirror_setting = (
            f"ppo.mirror_augment={self.ppo.mirror_augment}" if self.ppo.mirror_augment != "none"
            else f"ppo.mirror_coef={self.ppo.mirror_coef:g}" if self.ppo.mirror_coef > 0 else None
        )  # fmt: skip
        if mirror_setting is not None:
            where = (
                "a Gymnasium environment (no known mirror)" if self.gym.env_id is not None
                else f"algo={self.algo} (feed-forward PPO only)" if self.algo != "ppo"
                else f"env.action_form={self.env.action_form}" if self.env.action_form != "table"
                else "env.action_masking=true" if self.env.action_masking
                else "env.rlgym (an RLGym v2 observation has no known mirror)" if self.env.rlgym is not None
                else None
            )  # fmt: skip
            if where is not None:
                raise ValueError(
                    f"{mirror_setting} mirrors Rocket League rows of speedflip's own observation builders and lookup "
                    f"table, not {where}; set ppo.mirror_augment=none and ppo.mirror_coef=0"
                )
        if self.ppo.bootstrap_through_goals and (self.gym.env_id is not None or self.env.rlgym is not None):
            where = "a Gymnasium environment" if self.gym.env_id is not None else "env.rlgym (its own done conditions)"
            raise ValueError(
                "ppo.bootstrap_through_goals=true treats every termination as a goal that play goes on after, which "
                f"holds for speedflip's Rocket League env only, not {where}; set ppo.bootstrap_through_goals=false"
            )
        ends = self.ppo.kickstart_steps is not None or self.ppo.kickstart_fraction is not None
        if self.ppo.release_kl_coef > 0 and (self.ppo.kickstart_coef == 0 or not ends):
            raise ValueError(
                f"ppo.release_kl_coef={self.ppo.release_kl_coef:g} holds the policy near what it was when the "
                "kickstart was released, so it needs a kickstart that ends: set ppo.kickstart_coef > 0 and "
                "ppo.kickstart_steps (or ppo.kickstart_fraction), or ppo.release_kl_coef=0"
            )
        return self

    @property
    def batch_size(self) -> int:
        agents = self.gym.num_envs if self.gym.env_id is not None else self.env.num_agents
        return agents * self.ppo.num_steps


def _non_finite_value(value: Any, path: str) -> Any:
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, (list, tuple)) else value[part]
    return value


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


# ---------------------------------------------------------------------- loading
def preset_names() -> list[str]:
    """Names of the presets shipped with the package."""
    folder = resources.files("speedflip") / "presets"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def _read_yaml(text: str, source: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(
            f"{source} is not valid YAML{where}: {getattr(err, 'problem', None) or err}. "
            "Fix the syntax (indentation, 'key: value' pairs) and run again."
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must hold a mapping of sections (env:, ppo:, run:), not {type(data).__name__}")
    return data


def load_preset(name: str) -> dict[str, Any]:
    names = preset_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"unknown preset '{name}'. Available presets: {', '.join(names)}.{hint}")
    text = (resources.files("speedflip") / "presets" / f"{name}.yaml").read_text()
    return _read_yaml(text, f"preset '{name}'")


def load_file(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file '{p}' does not exist. Pass a YAML file path to --config, or use --preset.")
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"config file '{p}' cannot be read: {err}") from None
    return _read_yaml(text, f"config file '{p}'")


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if (
            isinstance(value, dict)
            and isinstance(out.get(key), dict)
            and key not in ("rewards", "state_setters", "mechanics_setters")
        ):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _known_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    keys = []
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys += _known_keys(annotation, f"{prefix}{name}.")
        else:
            keys.append(f"{prefix}{name}")
    return keys


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"ppo.learning_rate=1e-4"`` -> ``(["ppo", "learning_rate"], 0.0001)`` (value parsed as YAML)."""
    if "=" not in text:
        raise ConfigError(f"--set '{text}' must look like key=value, e.g. --set ppo.learning_rate=1e-4")
    key, raw = text.split("=", 1)
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"--set '{text}' has an empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return parts, value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``key.path=value`` overrides to a copy of ``data``; a number in the path indexes a list
    (``env.reward_phases.0.until_steps=1000``)."""
    out = copy.deepcopy(data)
    for text in overrides:
        parts, value = parse_override(text)
        node: Any = out
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    where = ".".join(parts[:depth])
                    raise ConfigError(
                        f"--set '{text}': '{where}' is a list of {len(node)} items; use an index 0..{len(node) - 1}"
                    )
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
                continue
            if last:
                node[part] = value
            else:
                if not isinstance(node.get(part), (dict, list)):
                    node[part] = {}
                node = node[part]
    return out


def build_config(data: dict[str, Any], source: str = "config") -> Config:
    """Validate a nested dict into a :class:`Config`, turning pydantic errors into one clear message."""
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_explain(err, source)) from None


def _explain(err: ValidationError, source: str) -> str:
    known = _known_keys(Config)
    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"])
        if e["type"] == "extra_forbidden":
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            section = key.rsplit(".", 1)[0] if "." in key else ""
            allowed = [k for k in known if k.startswith(section + ".")] if section else list(Config.model_fields)
            lines.append(f"unknown key '{key}'.{hint} Allowed here: {', '.join(allowed)}.")
        else:
            value = e.get("input")
            shown = repr(value) if not isinstance(value, dict) else "a mapping"
            msg = str(e["msg"]).removeprefix("Value error, ")
            where = f"key '{key}'" if key else "config"
            lines.append(f"{where}: bad value {shown}: {msg}.")
    return f"invalid {source}: " + " ".join(lines) + " Fix it in the YAML file or with --set KEY=VALUE."


def resolve_config(
    preset: str | None = None, config_file: str | Path | None = None, overrides: list[str] | None = None
) -> Config:
    """Preset (default ``quick``) <- config file <- ``--set`` overrides, validated."""
    sources = []
    data = load_preset(preset or "quick")
    sources.append(f"preset '{preset or 'quick'}'")
    if config_file is not None:
        data = _merge(data, load_file(config_file))
        sources.append(f"'{config_file}'")
    if overrides:
        data = apply_overrides(data, overrides)
        sources.append("--set")
    return build_config(data, " + ".join(sources))


def config_to_dict(cfg: Config) -> dict[str, Any]:
    return cfg.model_dump(mode="json")
