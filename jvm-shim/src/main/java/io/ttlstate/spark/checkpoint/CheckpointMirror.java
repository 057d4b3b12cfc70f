package io.ttlstate.spark.checkpoint;

import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.Arrays;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkConf;
import org.apache.spark.deploy.SparkHadoopUtil;

import io.ttlstate.spark.compat.CheckpointFileOps;

/**
 * The offline tools' access to a checkpoint on any Hadoop file system the query itself can use
 * (hdfs:, s3a:, abfs:, ...): {@code python -m ttlstate} runs this through {@code spark-submit},
 * so the Hadoop configuration is the query's (spark.hadoop.* confs, spark-defaults.conf,
 * HADOOP_CONF_DIR, --packages), and works on a local copy.
 *
 * <ul>
 *   <li>{@code download URI DIR [SUBDIR...]}: copies the checkpoint's {@code metadata},
 *       {@code offsets/}, {@code commits/} and {@code state/} (or the SUBDIRs given) under DIR;
 *       prints {@code COPIED <files> <bytes>}.
 *   <li>{@code upload DIR URI RELPATH...}: writes each DIR/RELPATH to URI/RELPATH, in the order
 *       given, each atomically (Spark's CheckpointFileManager: a rename on HDFS, a single PUT on
 *       an object store); a RELPATH starting with {@code -} is deleted instead.
 * </ul>
 * An error exits with status 1, its last stderr line {@code ERROR <path>: <message>}.
 */
public final class CheckpointMirror {
    private static final String[] CHECKPOINT_PARTS = {"metadata", "offsets", "commits", "state"};

    private final CheckpointFileOps fs;
    private final Path root;
    private long files;
    private long bytes;

    private CheckpointMirror(Path root, Configuration conf) {
        this.root = root;
        this.fs = CheckpointFileOps.create(root, conf);
    }

    public static void main(String[] args) {
        Path at = null;
        try {
            Configuration conf = SparkHadoopUtil.get().newConfiguration(new SparkConf());
            switch (args[0]) {
                case "download": {
                    at = new Path(args[1]);
                    CheckpointMirror m = new CheckpointMirror(new Path(args[1]), conf);
                    String[] parts = args.length > 3 ? Arrays.copyOfRange(args, 3, args.length) : CHECKPOINT_PARTS;
                    for (String part : parts) {
                        at = new Path(m.root, part);
                        m.download(at, new File(args[2], part));
                    }
                    System.out.println("COPIED " + m.files + " " + m.bytes);
                    break;
                }
                case "upload": {
                    at = new Path(args[2]);
                    CheckpointMirror m = new CheckpointMirror(new Path(args[2]), conf);
                    for (int i = 3; i < args.length; i++) {
                        boolean delete = args[i].startsWith("-");
                        String rel = delete ? args[i].substring(1) : args[i];
                        at = new Path(m.root, rel);
                        if (delete) {
                            m.fs.delete(at);
                        } else {
                            m.upload(new File(args[1], rel), at);
                        }
                    }
                    System.out.println("COPIED " + m.files + " " + m.bytes);
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown command " + args[0] + " (download, upload)");
            }
        } catch (Exception e) {
            Throwable cause = e;
            while (cause.getCause() != null && cause.getCause() != cause) {
                cause = cause.getCause();
            }
            System.err.println("ERROR " + (at == null ? "" : at) + ": " + e.getMessage()
                + (cause == e ? "" : " (" + cause + ")"));
            System.exit(1);
        }
        System.exit(0);
    }

    /** Copies the file or directory tree at {@code src}, if it exists, to {@code dest}. */
    private void download(Path src, File dest) throws IOException {
        FileStatus[] children;
        try {
            children = fs.exists(src) ? fs.list(src) : null;
        } catch (FileNotFoundException e) {
            children = null;
        }
        if (children == null) {
            return;
        }
        if (children.length == 1 && children[0].isFile() && children[0].getPath().equals(src)) {
            copyDown(children[0], dest);  // listing a file gives the file
            return;
        }
        Files.createDirectories(dest.toPath());
        for (FileStatus child : children) {
            File to = new File(dest, child.getPath().getName());
            if (child.isDirectory()) {
                download(child.getPath(), to);
            } else {
                copyDown(child, to);
            }
        }
    }

    private void copyDown(FileStatus st, File dest) throws IOException {
        File tmp = new File(dest.getParentFile(), "." + dest.getName() + ".part");
        try (InputStream in = fs.open(st.getPath()); OutputStream out = Files.newOutputStream(tmp.toPath())) {
            bytes += in.transferTo(out);
        }
        Files.move(tmp.toPath(), dest.toPath(), StandardCopyOption.REPLACE_EXISTING);
        dest.setLastModified(st.getModificationTime());  // as on the file system (best effort)
        files++;
    }

    private void upload(File src, Path dest) throws IOException {
        fs.mkdirs(dest.getParent());
        FSDataOutputStream out = fs.createAtomic(dest, true);
        try (InputStream in = Files.newInputStream(src.toPath())) {
            bytes += in.transferTo(out);
        } catch (IOException | RuntimeException e) {
            CheckpointFileOps.cancel(out);
            throw e;
        }
        out.close();
        files++;
    }
}
