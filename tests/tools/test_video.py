"""a3c.tools.video's recorder: every frame RecordVideo captured (the reset frame, then one per step) is in the
MP4 once and in order, which moviepy's own ImageSequenceClip does not guarantee (see WholeRecordVideo)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from a3c.tools.video import WholeRecordVideo
from tests.support.extras import require_extra


class Counter(gym.Env):
    """An episode of ``length`` steps whose rendered frame [32, 32, 3] is filled with 7 * (steps so far)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}
    observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(1)

    def __init__(self, length: int):
        self.render_mode, self.length, self.t = "rgb_array", length, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), 0.0, self.t >= self.length, False, {}

    def render(self):
        return np.full((32, 32, 3), self.t * 7 % 256, np.uint8)


@pytest.mark.parametrize(("length", "fps"), [(200, 30), (100, 15)])
def test_every_frame_is_written_once_in_order(tmp_path, length, fps):
    imageio = require_extra("imageio", "video")
    folder = tmp_path / "videos"  # a new one: RecordVideo warns about an existing folder
    recorder = WholeRecordVideo(Counter(length), str(folder), lambda episode: episode == 0, fps=fps)
    recorder.reset(seed=0)
    while not recorder.step(0)[2]:
        pass
    recorder.reset()  # as the vector env's autoreset does: this writes the first episode's video
    recorder.close()
    (video,) = folder.iterdir()
    with imageio.get_reader(video, "ffmpeg") as reader:
        shades = [int(frame.mean()) for frame in reader.iter_data()]
    # 200 steps at 30 fps: moviepy alone wrote 200 frames, with frame 71 twice and 74 never.
    assert len(shades) == length + 1
    wrong = [(i, shade) for i, shade in enumerate(shades) if abs(shade - i * 7 % 256) > 3]  # h264 is lossy
    assert not wrong, wrong
