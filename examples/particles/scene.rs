//! The scene, on the CPU: particles generated from a seed, the orbiting camera, the projection the
//! shaders use (`glsl/particles/frame.glsl`), and the checks: the sorted order read back from the
//! GPU, and a reference image composited on the CPU with the same sprites, in the same order, with
//! the same coverage function evaluated at the same pixel centres and the same blend equation.

use std::f32::consts::PI;

use anyhow::{bail, ensure, Result};
use bytemuck::{Pod, Zeroable};

/// One particle as the shaders read it (`struct Particle` in `frame.glsl`, 32 bytes std430).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Particle {
    /// xyz: world position; w: radius in world units.
    pub position_size: [f32; 4],
    /// rgb: colour; a: opacity at the disc's centre.
    pub color: [f32; 4],
}

/// The push constants of every particle shader (`Frame` in `frame.glsl`, 96 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct FrameConstants {
    /// World to view, column-major: the camera looks down -z with +y up.
    pub view: [f32; 16],
    /// x: focal length in pixels; y: width; z: height; w: near distance.
    pub camera: [f32; 4],
    /// x: the number of particles.
    pub counts: [u32; 4],
}

/// The colour the image is cleared to, premultiplied and opaque.
pub const CLEAR: [f32; 4] = [0.01, 0.012, 0.03, 1.0];
/// Particles nearer than this (view-space depth) are culled.
pub const NEAR: f32 = 0.05;
/// Vertical field of view, radians.
const FOV_Y: f32 = 50.0 * PI / 180.0;

/// SplitMix64: a small generator whose output depends on the seed alone, so a scene is the same
/// on every machine and with every version of every crate.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.uniform()
    }
    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f32 {
        let u = 1.0 - self.uniform();
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (2.0 * PI * v).cos()
    }
}

/// A spiral galaxy of `count` particles in the xz plane: a warm bulge, two blue arms with pink
/// star-forming knots, and dark dust whose occlusion shows the back-to-front order. Sprite sizes
/// shrink as the count grows (as its cube root), so that any count fills the disc about as densely.
pub fn galaxy(count: u32, seed: u64) -> Vec<Particle> {
    let mut rng = SplitMix(seed ^ 0x5eed_0f9a_1a1a_c7e5);
    let base = 0.012 * (65536.0 / count.max(1) as f32).cbrt();
    (0..count)
        .map(|_| {
            let kind = rng.uniform();
            if kind < 0.15 {
                // Bulge: a flattened Gaussian.
                let (x, y, z) = (rng.normal() * 0.22, rng.normal() * 0.12, rng.normal() * 0.22);
                let warm = rng.range(0.0, 0.25);
                Particle {
                    position_size: [x, y, z, base * rng.range(1.0, 2.2)],
                    color: [1.0, 0.8 + warm * 0.6, 0.55 + warm, rng.range(0.25, 0.55)],
                }
            } else {
                // Disc: two logarithmic arms, scattered less the further out.
                let r = (0.12 - 0.45 * (1.0 - rng.uniform()).ln()).min(2.0);
                let arm = if rng.uniform() < 0.5 { 0.0 } else { PI };
                let theta = arm + 5.2 * r.ln_1p() + rng.normal() * 0.28 / (0.6 + r);
                let (x, z) = (r * theta.cos(), r * theta.sin());
                let y = rng.normal() * 0.03 * (1.0 + 0.5 * r);
                let tint = rng.uniform();
                let (color, size) = if tint < 0.10 {
                    // Dust: dark, nearly opaque, large.
                    ([0.10, 0.06, 0.04, rng.range(0.6, 0.9)], base * rng.range(1.5, 3.0))
                } else if tint < 0.16 {
                    ([1.0, 0.35, 0.55, rng.range(0.5, 0.8)], base * rng.range(0.8, 1.6))
                } else {
                    let white = rng.range(0.0, 0.5);
                    ([0.45 + white, 0.6 + white * 0.7, 1.0, rng.range(0.3, 0.7)], base * rng.range(0.5, 1.4))
                };
                Particle { position_size: [x, y, z, size], color }
            }
        })
        .collect()
}

/// The camera of frame `frame`: orbiting the galaxy 3 degrees a frame, above its plane, looking
/// at its centre from inside the outer disc (so that some particles are behind it and culled),
/// with the focal length scaled by `zoom`.
pub fn camera(frame: u32, width: u32, height: u32, count: u32, zoom: f32) -> FrameConstants {
    let angle = 0.6 + frame as f32 * (3.0 * PI / 180.0);
    let eye = [1.9 * angle.cos(), 0.75, 1.9 * angle.sin()];
    let target = [0.0, -0.1, 0.0];
    let view = look_at(eye, target, [0.0, 1.0, 0.0]);
    let focal = zoom * 0.5 * height as f32 / (0.5 * FOV_Y).tan();
    FrameConstants { view, camera: [focal, width as f32, height as f32, NEAR], counts: [count, 0, 0, 0] }
}

fn sub(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
fn cross(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
}
fn dot(a: [f32; 3], b: [f32; 3]) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
fn normalize(a: [f32; 3]) -> [f32; 3] {
    let l = dot(a, a).sqrt();
    [a[0] / l, a[1] / l, a[2] / l]
}

/// A right-handed view matrix, column-major (as GLSL's mat4).
fn look_at(eye: [f32; 3], target: [f32; 3], up: [f32; 3]) -> [f32; 16] {
    let f = normalize(sub(target, eye));
    let s = normalize(cross(f, up));
    let u = cross(s, f);
    [
        s[0],
        u[0],
        -f[0],
        0.0,
        s[1],
        u[1],
        -f[1],
        0.0,
        s[2],
        u[2],
        -f[2],
        0.0,
        -dot(s, eye),
        -dot(u, eye),
        dot(f, eye),
        1.0,
    ]
}

/// A particle on the image, as `project` in `frame.glsl` computes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sprite {
    /// Centre of the disc, framebuffer pixels (y down).
    pub center: [f32; 2],
    /// Radius of the disc, pixels (at least 1).
    pub radius: f32,
    /// View-space depth: the sort key.
    pub depth: f32,
}

/// `project` of `frame.glsl`, operation for operation (`view * vec4(p, 1)` as GLSL's column sums).
pub fn project(frame: &FrameConstants, p: &Particle) -> Sprite {
    let m = &frame.view;
    let [x, y, z, size] = p.position_size;
    let row = |r: usize| m[r] * x + m[4 + r] * y + m[8 + r] * z + m[12 + r];
    let (vx, vy, vz) = (row(0), row(1), row(2));
    let depth = -vz;
    let [focal, width, height, _] = frame.camera;
    let scale = focal / depth;
    Sprite { center: [0.5 * width + vx * scale, 0.5 * height - vy * scale], radius: (size * scale).max(1.0), depth }
}

/// `visible` of `frame.glsl`. `slack` widens (positive) or narrows (negative) both tests, so that
/// a particle the GPU may judge either way (its depth or quad within rounding of the bounds) can
/// be told apart.
pub fn visible(frame: &FrameConstants, s: &Sprite, slack: f32) -> bool {
    let half = [0.5 * frame.camera[1], 0.5 * frame.camera[2]];
    let reach = s.radius + 1.0 + slack;
    s.depth > frame.camera[3] * (1.0 - slack * 1e-3)
        && (s.center[0] - half[0]).abs() < half[0] + reach
        && (s.center[1] - half[1]).abs() < half[1] + reach
}

/// What the GPU's sort produced for one frame, as read back.
pub struct SortedFrame<'a> {
    /// The GPU-side count the depth pass wrote (sprites drawn).
    pub count: u32,
    /// The first `count` sorted keys.
    pub keys: &'a [f32],
    /// The first `count` sorted indices.
    pub indices: &'a [u32],
}

/// What [`check_order`] found.
#[derive(Clone, Copy, Debug)]
pub struct OrderReport {
    /// Sprites drawn.
    pub count: u32,
    /// Largest |GPU key - CPU depth| / depth.
    pub max_key_error: f32,
}

/// Checks the GPU's sort for one frame: keys non-increasing (back to front) over the count, each
/// index distinct and in range, each key the depth of its particle (to 1e-5 relative: the GPU may
/// fuse the matrix product's multiplies and adds), every particle visible beyond doubt drawn and
/// none culled beyond doubt drawn.
pub fn check_order(frame: &FrameConstants, particles: &[Particle], sorted: &SortedFrame<'_>) -> Result<OrderReport> {
    let n = particles.len();
    let count = sorted.count as usize;
    ensure!(count <= n, "GPU count {count} is over the {n} particles");
    ensure!(
        sorted.keys.len() >= count && sorted.indices.len() >= count,
        "fewer keys or indices read back than the count"
    );
    let (keys, indices) = (&sorted.keys[..count], &sorted.indices[..count]);
    if let Some(i) = keys.windows(2).position(|w| w[0] < w[1]) {
        bail!("keys not back to front: key {i} = {} < key {} = {}", keys[i], i + 1, keys[i + 1]);
    }
    let mut drawn = vec![false; n];
    let mut max_key_error = 0f32;
    for (slot, (&index, &key)) in indices.iter().zip(keys).enumerate() {
        let i = index as usize;
        ensure!(i < n, "slot {slot}: index {index} out of range");
        ensure!(!std::mem::replace(&mut drawn[i], true), "slot {slot}: index {index} drawn twice");
        let depth = project(frame, &particles[i]).depth;
        let error = (key - depth).abs() / depth.abs().max(1e-3);
        ensure!(error <= 1e-5, "slot {slot}: key {key} is not the depth {depth} of particle {index}");
        max_key_error = max_key_error.max(error);
    }
    for (i, p) in particles.iter().enumerate() {
        let s = project(frame, p);
        // Slack of 0.01 px and 1e-5 relative depth: far beyond the GPU's rounding.
        let (inside, outside) = (visible(frame, &s, -0.01), !visible(frame, &s, 0.01));
        if inside {
            ensure!(drawn[i], "particle {i} is visible ({s:?}) but was not drawn");
        }
        ensure!(!(outside && drawn[i]), "particle {i} is culled ({s:?}) but was drawn");
    }
    Ok(OrderReport { count: sorted.count, max_key_error })
}

/// How the colour attachment rounds each blend's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// R32G32B32A32_SFLOAT.
    F32,
    /// R16G16B16A16_SFLOAT: each blend's result rounded to half precision.
    F16,
}

/// Composites `order` (indices, back to front) over the clear colour as the GPU does: for each
/// sprite and each pixel whose centre lies within its disc, coverage `(1 - d^2/r^2)^2` times the
/// opacity, premultiplied, blended `src + dst * (1 - src.a)`. Returns RGBA rows, top first.
pub fn composite(
    frame: &FrameConstants,
    particles: &[Particle],
    order: &[u32],
    width: u32,
    height: u32,
    precision: Precision,
) -> Vec<[f32; 4]> {
    let (w, h) = (width as usize, height as usize);
    let mut image = vec![CLEAR; w * h];
    let round = |x: f32| match precision {
        Precision::F32 => x,
        Precision::F16 => f16_to_f32(f32_to_f16(x)),
    };
    for &index in order {
        let p = &particles[index as usize];
        let s = project(frame, p);
        let [cx, cy] = s.center;
        let r2 = s.radius * s.radius;
        // Pixel centres x + 0.5 within the disc: x in [cx - r - 0.5, cx + r - 0.5].
        let x0 = (cx - s.radius - 0.5).floor().max(0.0) as usize;
        let x1 = ((cx + s.radius - 0.5).ceil().max(-1.0) as usize + 1).min(w);
        let y0 = (cy - s.radius - 0.5).floor().max(0.0) as usize;
        let y1 = ((cy + s.radius - 0.5).ceil().max(-1.0) as usize + 1).min(h);
        if cx + s.radius + 0.5 < 0.0 || cy + s.radius + 0.5 < 0.0 {
            continue;
        }
        for y in y0..y1 {
            for x in x0..x1 {
                let dx = x as f32 + 0.5 - cx;
                let dy = y as f32 + 0.5 - cy;
                let q = (1.0 - (dx * dx + dy * dy) / r2).max(0.0);
                let alpha = p.color[3] * q * q;
                if alpha == 0.0 {
                    continue;
                }
                let src = [p.color[0] * alpha, p.color[1] * alpha, p.color[2] * alpha, alpha];
                let dst = &mut image[y * w + x];
                for c in 0..4 {
                    dst[c] = round(src[c] + dst[c] * (1.0 - alpha));
                }
            }
        }
    }
    image
}

/// Per-channel differences between two images, in units of 1/255 (one step of the 8-bit PNG).
#[derive(Clone, Copy, Debug)]
pub struct ImageDiff {
    /// Largest |a - b| per channel (RGBA).
    pub max: [f32; 4],
    /// Mean |a - b| per channel.
    pub mean: [f32; 4],
}

/// Compares two RGBA images of the same size.
pub fn compare(a: &[[f32; 4]], b: &[[f32; 4]]) -> ImageDiff {
    assert_eq!(a.len(), b.len(), "images of different sizes");
    let (mut max, mut sum) = ([0f32; 4], [0f64; 4]);
    for (pa, pb) in a.iter().zip(b) {
        for c in 0..4 {
            let d = (pa[c] - pb[c]).abs() * 255.0;
            max[c] = max[c].max(d);
            sum[c] += f64::from(d);
        }
    }
    let n = a.len().max(1) as f64;
    ImageDiff { max, mean: sum.map(|s| (s / n) as f32) }
}

/// Largest difference allowed between the GPU's image and the reference, per channel, in 1/255,
/// and largest mean difference, for an attachment of this precision.
///
/// Both evaluate the same coverage at the same pixel centres for the same sprites in the same
/// order, and every pixel a disc covers lies inside its quad with a pixel to spare, so rasterization
/// rules and sub-pixel snapping change nothing. What is left is rounding: the GPU may fuse the
/// projection's multiplies and adds and divide approximately (the disc's centre and radius, and
/// d^2/r^2, differ in the last bits of a float), and may round each blend differently. Over a
/// pixel, each blend's error is damped by (1 - alpha) of every later blend, so the total stays
/// within a small multiple of one blend's rounding divided by the sprites' opacity. In f32 that is
/// thousandths of a step of the 8-bit output, and half a step is allowed. In f16 one rounding is
/// up to an eighth of a step near 1.0 (half an ulp, 2^-11) where both round to nearest, twice
/// that where the device rounds toward zero (lavapipe does; the reference rounds to nearest), and
/// 2 steps are allowed. A wrong order differs by tens to hundreds of steps (the test composites
/// the reverse order).
pub fn tolerance(precision: Precision) -> (f32, f32) {
    match precision {
        Precision::F32 => (0.5, 0.01),
        Precision::F16 => (2.0, 0.1),
    }
}

/// What [`check_frame`] found.
#[derive(Clone, Copy, Debug)]
pub struct FrameCheck {
    /// The sort.
    pub order: OrderReport,
    /// The image against the reference.
    pub diff: ImageDiff,
}

/// Checks one frame: the order ([`check_order`]), then the image against the reference
/// composited in that order, within [`tolerance`].
pub fn check_frame(
    frame: &FrameConstants,
    particles: &[Particle],
    sorted: &SortedFrame<'_>,
    image: &[[f32; 4]],
    size: (u32, u32),
    precision: Precision,
) -> Result<FrameCheck> {
    let order = check_order(frame, particles, sorted)?;
    let reference = composite(frame, particles, &sorted.indices[..sorted.count as usize], size.0, size.1, precision);
    let diff = compare(image, &reference);
    let (max, mean) = tolerance(precision);
    ensure!(
        diff.max.iter().all(|&d| d <= max) && diff.mean.iter().all(|&d| d <= mean),
        "image differs from the CPU reference: max {:?}, mean {:?} (1/255; allowed {max}, {mean})",
        diff.max,
        diff.mean
    );
    Ok(FrameCheck { order, diff })
}

/// IEEE binary16 bits of `x`, rounded to nearest even (as a float attachment stores a blend).
pub fn f32_to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let mant = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if mant != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        // Subnormal: shift the full mantissa down, rounding to nearest even.
        let m = mant | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1 << shift) - 1);
        let mut out = m >> shift;
        if rest > half || (rest == half && out & 1 == 1) {
            out += 1;
        }
        return sign | out as u16;
    }
    let rest = mant & 0x1fff;
    let mut out = ((e as u32) << 10) | (mant >> 13);
    if rest > 0x1000 || (rest == 0x1000 && out & 1 == 1) {
        out += 1; // may carry into the exponent, which is still correct (up to infinity)
    }
    sign | out as u16
}

/// The value of binary16 bits.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let mant = f32::from(h & 0x3ff);
    sign * match exp {
        0 => mant * 2f32.powi(-24),
        0x1f if mant == 0.0 => f32::INFINITY,
        0x1f => f32::NAN,
        _ => (1.0 + mant / 1024.0) * 2f32.powi(exp - 15),
    }
}

/// RGB8 pixels of an image (values clamped to [0, 1], rounded), for the PNG.
pub fn to_rgb8(image: &[[f32; 4]]) -> Vec<u8> {
    image.iter().flat_map(|p| [p[0], p[1], p[2]]).map(|v| (v.clamp(0.0, 1.0) * 255.0).round() as u8).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_round_trips() {
        for x in [0.0f32, 1.0, 0.5, 0.1, 65504.0, 1e-5, 6.1e-5, 0.999_99, 1234.5] {
            let h = f16_to_f32(f32_to_f16(x));
            assert!((h - x).abs() <= x.abs() * 1e-3 + 6e-8, "{x} -> {h}");
        }
        assert_eq!(f32_to_f16(1.0), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 1.0 / 2048.0), 0x3c00, "ties to even");
        assert_eq!(f32_to_f16(1.0 + 3.0 / 2048.0), 0x3c02, "ties to even");
    }
}
