package icebox.functions;

import com.google.gson.JsonObject;
import java.awt.AlphaComposite;
import java.awt.Color;
import java.awt.GradientPaint;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.SplittableRandom;
import javax.imageio.IIOImage;
import javax.imageio.ImageIO;
import javax.imageio.ImageWriteParam;
import javax.imageio.ImageWriter;
import javax.imageio.stream.MemoryCacheImageOutputStream;

/**
 * image-resize (Desiccant's Java set): resizes an image with javax.imageio and java.awt, all in
 * memory. The source, a {@code width} x {@code height} picture of gradients, shapes and noise
 * drawn from {@code seed}, is encoded as a JPEG (what the function would fetch), decoded,
 * scaled to {@code target_width} (aspect kept) by successive bilinear halvings, which is how
 * Java code gets a smooth downscale, then encoded as JPEG and PNG.
 */
public final class ImageResize {
    static {
        // No display in the sandbox; set before the first java.awt class initialises.
        System.setProperty("java.awt.headless", "true");
        // Otherwise ImageIO.read/write on streams buffer through temporary files in /tmp.
        ImageIO.setUseCache(false);
    }

    private ImageResize() {}

    public static JsonObject main(JsonObject args) {
        int width = Params.integer(args, "width", 1024, 16, 8192);
        int height = Params.integer(args, "height", 768, 16, 8192);
        int targetWidth = Params.integer(args, "target_width", 256, 1, width);
        float quality = (float) Params.real(args, "quality", 0.85, 0.05, 1.0);
        long seed = Params.longValue(args, "seed", 42, 0, Long.MAX_VALUE);

        byte[] sourceJpeg = jpeg(generate(width, height, seed), quality);
        BufferedImage source = decode(sourceJpeg);
        int targetHeight = Math.max(1, (int) Math.round((double) height * targetWidth / width));
        BufferedImage resized = resize(source, targetWidth, targetHeight);
        byte[] outJpeg = jpeg(resized, quality);
        byte[] outPng = png(resized);

        JsonObject result = new JsonObject();
        result.addProperty("source_width", width);
        result.addProperty("source_height", height);
        result.addProperty("source_jpeg_bytes", sourceJpeg.length);
        result.addProperty("width", resized.getWidth());
        result.addProperty("height", resized.getHeight());
        result.addProperty("jpeg_bytes", outJpeg.length);
        result.addProperty("png_bytes", outPng.length);
        double[] mean = meanColor(resized);
        result.addProperty("mean_red", Math.round(mean[0] * 100) / 100.0);
        result.addProperty("mean_green", Math.round(mean[1] * 100) / 100.0);
        result.addProperty("mean_blue", Math.round(mean[2] * 100) / 100.0);
        return result;
    }

    static BufferedImage generate(int width, int height, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        BufferedImage img = new BufferedImage(width, height, BufferedImage.TYPE_INT_RGB);
        Graphics2D g = img.createGraphics();
        try {
            g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
            g.setPaint(new GradientPaint(0, 0, randomColor(random, 255), width, height, randomColor(random, 255)));
            g.fillRect(0, 0, width, height);
            g.setComposite(AlphaComposite.getInstance(AlphaComposite.SRC_OVER, 0.6f));
            for (int i = 0; i < 60; i++) {
                g.setColor(randomColor(random, 255));
                int w = 1 + random.nextInt(Math.max(1, width / 3));
                int h = 1 + random.nextInt(Math.max(1, height / 3));
                int x = random.nextInt(width) - w / 2;
                int y = random.nextInt(height) - h / 2;
                if (i % 2 == 0) {
                    g.fillOval(x, y, w, h);
                } else {
                    g.fillRect(x, y, w, h);
                }
            }
        } finally {
            g.dispose();
        }
        // Sensor-like noise, so the JPEG encoder has texture to work on.
        int[] row = new int[width];
        for (int y = 0; y < height; y++) {
            img.getRGB(0, y, width, 1, row, 0, width);
            for (int x = 0; x < width; x++) {
                int noise = random.nextInt(17) - 8;
                int p = row[x];
                row[x] = clamp((p >> 16 & 0xff) + noise) << 16 | clamp((p >> 8 & 0xff) + noise) << 8
                        | clamp((p & 0xff) + noise);
            }
            img.setRGB(0, y, width, 1, row, 0, width);
        }
        return img;
    }

    /** Halve with bilinear filtering while above twice the target, then one last step. */
    static BufferedImage resize(BufferedImage src, int targetWidth, int targetHeight) {
        BufferedImage current = src;
        int w = src.getWidth();
        int h = src.getHeight();
        do {
            w = w / 2 >= targetWidth ? w / 2 : targetWidth;
            h = h / 2 >= targetHeight ? h / 2 : targetHeight;
            BufferedImage next = new BufferedImage(w, h, BufferedImage.TYPE_INT_RGB);
            Graphics2D g = next.createGraphics();
            try {
                g.setRenderingHint(RenderingHints.KEY_INTERPOLATION, RenderingHints.VALUE_INTERPOLATION_BILINEAR);
                g.setRenderingHint(RenderingHints.KEY_RENDERING, RenderingHints.VALUE_RENDER_QUALITY);
                g.drawImage(current, 0, 0, w, h, null);
            } finally {
                g.dispose();
            }
            current = next;
        } while (w != targetWidth || h != targetHeight);
        return current;
    }

    static byte[] jpeg(BufferedImage img, float quality) {
        ImageWriter writer = ImageIO.getImageWritersByFormatName("jpeg").next();
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (MemoryCacheImageOutputStream out = new MemoryCacheImageOutputStream(bytes)) {
            writer.setOutput(out);
            ImageWriteParam param = writer.getDefaultWriteParam();
            param.setCompressionMode(ImageWriteParam.MODE_EXPLICIT);
            param.setCompressionQuality(quality);
            writer.write(null, new IIOImage(img, null, null), param);
        } catch (IOException e) {
            throw new UncheckedIOException("JPEG encoding failed: " + e.getMessage(), e);
        } finally {
            writer.dispose();
        }
        return bytes.toByteArray();
    }

    static byte[] png(BufferedImage img) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try {
            if (!ImageIO.write(img, "png", bytes)) {
                throw new IllegalStateException("no PNG writer in this JVM");
            }
        } catch (IOException e) {
            throw new UncheckedIOException("PNG encoding failed: " + e.getMessage(), e);
        }
        return bytes.toByteArray();
    }

    static BufferedImage decode(byte[] data) {
        try {
            BufferedImage img = ImageIO.read(new ByteArrayInputStream(data));
            if (img == null) {
                throw new IllegalStateException("no reader for the image");
            }
            return img;
        } catch (IOException e) {
            throw new UncheckedIOException("decoding failed: " + e.getMessage(), e);
        }
    }

    static double[] meanColor(BufferedImage img) {
        long r = 0;
        long g = 0;
        long b = 0;
        int w = img.getWidth();
        int[] row = new int[w];
        for (int y = 0; y < img.getHeight(); y++) {
            img.getRGB(0, y, w, 1, row, 0, w);
            for (int p : row) {
                r += p >> 16 & 0xff;
                g += p >> 8 & 0xff;
                b += p & 0xff;
            }
        }
        double n = (double) w * img.getHeight();
        return new double[] {r / n, g / n, b / n};
    }

    private static Color randomColor(SplittableRandom random, int bound) {
        return new Color(random.nextInt(bound), random.nextInt(bound), random.nextInt(bound));
    }

    private static int clamp(int v) {
        return v < 0 ? 0 : Math.min(255, v);
    }
}
