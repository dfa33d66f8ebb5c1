"""`trainmedic check config`: CFG001-CFG004 on real config files, through the real command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainmedic.configcheck import check_config
from trainmedic.errors import UsageError

from ..conftest import run_cli


def write(tmp_path: Path, name: str, content: object) -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def codes(path: Path, **kwargs: object) -> list[str]:
    return [f.code for f in check_config(path, **kwargs)]  # type: ignore[arg-type]


HEALTHY_DS = {
    "train_batch_size": 64,
    "train_micro_batch_size_per_gpu": 8,
    "gradient_accumulation_steps": 4,
    "bf16": {"enabled": True},
    "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}},
}


def test_healthy_deepspeed_config_is_quiet(tmp_path: Path) -> None:
    path = write(tmp_path, "ds.json", HEALTHY_DS)
    result = run_cli("check", "config", str(path), "--world-size", "2", "--hardware", "cuda-bf16")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{path}: no configuration problems found\n"


def test_bad_deepspeed_config_one_line_per_problem_exit_1(tmp_path: Path) -> None:
    bad = {
        "train_batch_size": 64,
        "train_micro_batch_size_per_gpu": 8,
        "gradient_accumulation_steps": 2,
        "fp16": {"enabled": True, "loss_scale": 0},
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}},
    }
    path = write(tmp_path, "ds.json", bad)
    result = run_cli("check", "config", str(path), "--world-size", "2")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[2] for line in lines] == ["CFG001", "CFG002", "CFG004"]
    assert all(line.startswith(f"{path}: error ") for line in lines)
    assert "train_batch_size is 64 but train_micro_batch_size_per_gpu 8 x 2 devices" in lines[0]
    assert "= 32" in lines[0]
    assert "offload_param" in lines[2]
    assert "stage 2" in lines[2]


def test_json_output_carries_the_arithmetic(tmp_path: Path) -> None:
    path = write(tmp_path, "ds.json", {**HEALTHY_DS, "train_batch_size": 100})
    result = run_cli("check", "config", str(path), "--world-size", "2", "--format", "json")
    assert result.returncode == 1
    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["code"] == "CFG001"
    assert finding["evidence"]["product"] == 64
    assert finding["evidence"]["world_size"] == 2


def test_without_world_size_a_batch_no_device_count_can_reach(tmp_path: Path) -> None:
    ds = {"train_batch_size": 100, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2}
    assert codes(write(tmp_path, "ds.json", ds)) == ["CFG001"]
    ds["train_batch_size"] = 96  # 6 devices would do: nothing to say without --world-size
    assert codes(write(tmp_path, "ds.json", ds)) == []


def test_deepspeed_integer_division_of_a_derived_value_is_cfg004(tmp_path: Path) -> None:
    # DeepSpeed: gradient_accumulation_steps = 100 // 8 // 4 = 3 -> 96 != 100, it stops at its assertion
    path = write(tmp_path, "ds.json", {"train_batch_size": 100, "train_micro_batch_size_per_gpu": 8})
    (finding,) = check_config(path, world_size=4)
    assert finding.code == "CFG004"
    assert finding.evidence["derived_grad_accum"] == 3
    assert check_config(path, world_size=2) == check_config(path, world_size=2)  # deterministic
    tiny = write(tmp_path, "tiny.json", {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 8})
    (zero,) = check_config(tiny, world_size=4)  # 16 // 8 // 4 = 0 accumulation steps
    assert zero.code == "CFG004"
    assert "cannot start" in zero.message
    assert (
        codes(
            write(tmp_path, "ok.json", {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8}),
            world_size=4,
        )
        == []
    )


def test_deepspeed_auto_alone_is_not_judged(tmp_path: Path) -> None:
    ds = {
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
    }
    assert codes(write(tmp_path, "ds.json", ds), world_size=8) == []


def hf_args(**overrides: object) -> dict[str, object]:
    """The keys of `TrainingArguments.to_dict()` this check reads (transformers 5.x names)."""
    return {
        "output_dir": "out",
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 2,
        "learning_rate": 5e-05,
        "warmup_steps": 0,
        "fp16": False,
        "bf16": False,
        "deepspeed": None,
        **overrides,
    }


def test_hf_args_fill_deepspeed_auto_and_flag_what_hf_would_refuse(tmp_path: Path) -> None:
    write(
        tmp_path,
        "ds_auto.json",
        dict.fromkeys(
            ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"), "auto"
        )
        | {"bf16": {"enabled": "auto"}},
    )
    ok = write(tmp_path, "args.json", hf_args(bf16=True, deepspeed="ds_auto.json"))
    assert codes(ok, world_size=4, hardware="cuda-bf16") == []

    write(
        tmp_path,
        "ds_fixed.json",
        {
            "train_micro_batch_size_per_gpu": 16,
            "gradient_accumulation_steps": "auto",
            "fp16": {"enabled": True},
        },
    )
    bad = write(tmp_path, "args_bad.json", hf_args(bf16=True, deepspeed="ds_fixed.json"))
    found = check_config(bad, world_size=4)
    by_code = {f.code: f for f in found}
    assert set(by_code) == {"CFG001", "CFG002"}
    assert "train_micro_batch_size_per_gpu=16" in by_code["CFG001"].message
    assert "per_device_train_batch_size=4" in by_code["CFG001"].message


def test_hf_args_inline_deepspeed_and_both_precisions(tmp_path: Path) -> None:
    path = write(tmp_path, "args.json", hf_args(fp16=True, bf16=True, deepspeed={"train_batch_size": 20}))
    assert codes(path) == ["CFG001", "CFG002"]  # 20 is no multiple of 4 x 2; fp16 and bf16 both on


def test_hardware_profiles(tmp_path: Path) -> None:
    bf16 = write(tmp_path, "bf16.json", hf_args(bf16=True))
    fp16 = write(tmp_path, "fp16.json", hf_args(fp16=True))
    assert codes(bf16, hardware="cuda-fp16") == ["CFG002"]
    assert codes(bf16, hardware="cuda-bf16") == codes(bf16, hardware="cpu") == []
    assert codes(fp16, hardware="cpu") == ["CFG002"]
    assert codes(fp16, hardware="cuda-fp16") == []


ACCELERATE_MULTI_NODE = """\
compute_environment: LOCAL_MACHINE
debug: false
distributed_type: MULTI_GPU
downcast_bf16: false
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 2
num_processes: 8
rdzv_backend: static
same_network: false
use_cpu: false
"""


def test_accelerate_multi_machine_without_rendezvous(tmp_path: Path) -> None:
    # The shape `accelerate config` writes (ClusterConfig.to_yaml_file) when no IP/port was given.
    path = write(tmp_path, "accelerate.yaml", ACCELERATE_MULTI_NODE)
    (finding,) = check_config(path)
    assert finding.code == "CFG004"
    assert "main_process_ip or main_process_port" in finding.message
    fixed = write(
        tmp_path, "ok.yaml", ACCELERATE_MULTI_NODE + "main_process_ip: 10.0.0.1\nmain_process_port: 29500\n"
    )
    assert codes(fixed) == []
    odd = write(
        tmp_path,
        "odd.yaml",
        ACCELERATE_MULTI_NODE.replace("num_processes: 8", "num_processes: 7")
        + "main_process_ip: 10.0.0.1\nmain_process_port: 29500\n",
    )
    assert codes(odd) == ["CFG004"]


def test_accelerate_with_deepspeed_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        "zero.json",
        {
            "train_batch_size": "auto",
            "train_micro_batch_size_per_gpu": "auto",
            "zero_optimization": {"stage": 1, "offload_param": {"device": "nvme"}},
        },
    )
    text = ACCELERATE_MULTI_NODE.replace("num_machines: 2", "num_machines: 1").replace(
        "MULTI_GPU", "DEEPSPEED"
    )
    path = write(tmp_path, "acc.yaml", text + "deepspeed_config:\n  deepspeed_config_file: zero.json\n")
    (finding,) = check_config(path)
    assert finding.code == "CFG004"
    assert "nvme" in finding.message


def test_loop_config_bf16_with_grad_scaler_and_batch(tmp_path: Path) -> None:
    loop = {
        "trainer": {"precision": "bf16-mixed", "devices": 4, "grad_scaler": True},
        "data": {"per_device_batch_size": 32},
        "optim": {"lr": 0.1, "grad_accum_steps": 2, "global_batch_size": 512},
    }
    found = check_config(write(tmp_path, "loop.yaml", json.dumps(loop)))
    assert [f.code for f in found] == ["CFG001", "CFG002"]
    assert (
        "global_batch_size is 512 but per_device_batch_size 32 x 4 devices x grad_accum_steps 2 = 256"
        in found[0].message
    )


def test_reference_config_lr_not_scaled(tmp_path: Path) -> None:
    old = write(
        tmp_path, "old.json", {"per_device_batch_size": 32, "devices": 8, "lr": 0.1, "warmup_steps": 0}
    )
    new = write(
        tmp_path, "new.json", {"per_device_batch_size": 256, "devices": 8, "lr": 0.1, "warmup_steps": 0}
    )
    result = run_cli("check", "config", str(new), "--reference", str(old))
    assert result.returncode == 0, result.stderr  # a warning: below the default --fail-on error
    (line,) = result.stdout.splitlines()
    assert "warning CFG003 lr-not-scaled" in line
    assert "from 256 to 2048 (8x)" in line
    assert "~0.8" in line
    scaled = write(
        tmp_path, "scaled.json", {"per_device_batch_size": 256, "devices": 8, "lr": 0.8, "warmup_steps": 500}
    )
    assert codes(scaled, reference=old) == []
    no_warmup = write(tmp_path, "nowarm.json", {"per_device_batch_size": 256, "devices": 8, "lr": 0.8})
    assert codes(no_warmup, reference=old) == ["CFG003"]


@pytest.mark.parametrize(
    ("content", "name", "expected"),
    [
        (None, "missing.json", "no such file"),
        ("{not json", "broken.json", "not valid JSON (line 1"),
        ('{"epochs": 3}', "other.json", "not a recognised training config"),
        ("[1, 2]", "list.json", "expected a mapping"),
    ],
)
def test_unreadable_input_exits_2_with_one_line(
    tmp_path: Path, content: str | None, name: str, expected: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    result = run_cli("check", "config", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"trainmedic: error: {path}")
    assert expected in line


def test_bad_option_values_are_usage_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "ds.json", HEALTHY_DS)
    with pytest.raises(UsageError, match="--world-size"):
        check_config(path, world_size=0)
    result = run_cli("check", "config", str(path), "--hardware", "tpu")
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1


def test_configs_named_on_a_launcher_command_line(tmp_path: Path) -> None:
    from trainmedic.configcheck import configs_in_command
    from trainmedic.record import RunRecord
    from trainmedic.registry import run_rules

    write(
        tmp_path,
        "ds.json",
        {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2},
    )
    write(tmp_path, "labels.json", {"classes": ["cat", "dog"]})  # not a config: skipped quietly
    argv = ["deepspeed", "--num_gpus", "2", "train.py", "--labels", "labels.json", "--deepspeed=ds.json"]
    observations = configs_in_command(argv, tmp_path)
    assert len(observations) == 1
    assert observations[0].data["world_size"] == 2
    (finding,) = run_rules(RunRecord.of(observations))
    assert finding.code == "CFG001"
    torchrun = ["torchrun", "--nnodes", "2", "--nproc-per-node", "2", "train.py", "--config", "ds.json"]
    assert configs_in_command(torchrun, tmp_path)[0].data["world_size"] == 4
    assert configs_in_command(["python", "train.py", "missing.json"], tmp_path) == []


def test_the_supervisor_imports_configcheck_for_exactly_the_commands_it_reads() -> None:
    from trainmedic import configcheck
    from trainmedic.envinfo._background import CONFIG_SUFFIXES, names_a_config_file

    assert CONFIG_SUFFIXES == configcheck._CONFIG_SUFFIXES
    assert names_a_config_file(["deepspeed", "train.py", "--deepspeed=DS.JSON"])
    assert names_a_config_file(["python", "train.py", "--config", "run.yaml"])
    assert not names_a_config_file(["python", "train.py", "--epochs", "3", "--out=runs/a"])


CONFIGS = Path(__file__).resolve().parents[2] / "examples" / "breadth" / "configs"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("deepspeed_bad.json", ["CFG001", "CFG002", "CFG004"]),
        ("deepspeed_ok.json", []),
        ("deepspeed_auto.json", []),
        ("hf_args_bad.json", ["CFG001", "CFG002", "CFG002"]),
        ("hf_args_ok.json", []),
        ("accelerate_bad.yaml", ["CFG004"]),
        ("accelerate_ok.yaml", []),
    ],
)
def test_example_configs(name: str, expected: list[str]) -> None:
    assert codes(CONFIGS / name, world_size=2, hardware="cuda-bf16") == expected


def test_example_reference_pair() -> None:
    found = check_config(CONFIGS / "loop_scaled_bad.json", reference=CONFIGS / "loop_reference.json")
    assert [f.code for f in found] == ["CFG003"]
    assert "from 256 to 2048 (8x)" in found[0].message  # 8 devices, from the files themselves


def test_large_batch_with_warmup_written_as_zero(tmp_path: Path) -> None:
    args = write(
        tmp_path, "args.json", hf_args(per_device_train_batch_size=16, gradient_accumulation_steps=8)
    )
    assert codes(args, world_size=8) == []  # 1,024 per step
    (finding,) = check_config(args, world_size=64)  # 8,192 per step, warmup_steps 0
    assert finding.code == "CFG003"
    assert "8,192 samples per step and warmup_steps is 0" in finding.message
    warm = write(
        tmp_path,
        "warm.json",
        hf_args(per_device_train_batch_size=16, gradient_accumulation_steps=8, warmup_steps=500),
    )
    assert codes(warm, world_size=64) == []


@pytest.mark.slow
def test_a_real_training_arguments_dump(tmp_path: Path) -> None:
    """The dump transformers itself writes (to_json_string), with a DeepSpeed dict as users embed it."""
    from transformers import TrainingArguments

    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=16,
        gradient_accumulation_steps=8,
        use_cpu=True,
        report_to=[],
    )
    dump = json.loads(args.to_json_string())
    dump["deepspeed"] = {
        "train_micro_batch_size_per_gpu": "auto",
        "train_batch_size": 1000,
        "bf16": {"enabled": True},
    }
    found = check_config(write(tmp_path, "args.json", dump), world_size=64)
    assert [f.code for f in found] == ["CFG001", "CFG002"]
    assert "16 x 64 devices x gradient_accumulation_steps 8 = 8192" in found[0].message
    assert "bf16.enabled=True but the trainer's bf16|bf16_full_eval=False" in found[1].message
