import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * A MiniDFSCluster for the tests (pytest -m hdfs; tests/hdfs_cluster.py runs it): a namenode and
 * N datanodes in one process of its own, data under a base directory, the namenode's RPC on a
 * loopback port. Prints {@code READY hdfs://127.0.0.1:PORT} once every datanode has registered,
 * then answers one command per line on stdin with one line on stdout:
 * {@code stop-datanode I} (the datanode's shutdown: its sockets close mid-transfer, as when its
 * host dies), {@code exists PATH}, {@code list PATH} (the files under it, recursively, as paths
 * separated by tabs), {@code live-datanodes}. End of input shuts the cluster down.
 *
 * <p>Usage: {@code java MiniHdfs BASE_DIR DATANODES [PORT]} (PORT 0 or absent: a free one).
 */
public final class MiniHdfs {
  public static void main(String[] args) throws Exception {
    File base = new File(args[0]);
    int datanodes = Integer.parseInt(args[1]);
    int port = args.length > 2 ? Integer.parseInt(args[2]) : 0;
    Configuration conf = new Configuration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.getAbsolutePath());
    // a dead datanode is noticed in seconds rather than the default 10.5 minutes
    conf.setInt("dfs.namenode.heartbeat.recheck-interval", 2000);
    conf.setInt("dfs.heartbeat.interval", 1);
    MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf, base)
        .numDataNodes(datanodes).nameNodePort(port).format(true).build();
    Runtime.getRuntime().addShutdownHook(new Thread(cluster::shutdown));
    cluster.waitActive();
    FileSystem fs = cluster.getFileSystem();
    System.out.println("READY hdfs://127.0.0.1:" + cluster.getNameNodePort());
    System.out.flush();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line; (line = in.readLine()) != null; ) {
      String[] cmd = line.trim().split("\\s+", 2);
      String reply;
      try {
        switch (cmd[0]) {
          case "stop-datanode":
            reply = cluster.stopDataNode(Integer.parseInt(cmd[1])) != null ? "OK" : "ERROR no such datanode";
            break;
          case "exists":
            reply = fs.exists(new Path(cmd[1])) ? "true" : "false";
            break;
          case "list":
            StringBuilder files = new StringBuilder("FILES");
            if (fs.exists(new Path(cmd[1]))) {
              for (RemoteIterator<LocatedFileStatus> it = fs.listFiles(new Path(cmd[1]), true); it.hasNext(); ) {
                files.append('\t').append(it.next().getPath().toUri().getPath());
              }
            }
            reply = files.toString();
            break;
          case "live-datanodes":
            reply = Integer.toString(cluster.getNameNode().getNamesystem().getNumLiveDataNodes());
            break;
          default:
            reply = "ERROR unknown command " + cmd[0];
        }
      } catch (Exception e) {
        reply = "ERROR " + e;
      }
      System.out.println(reply);
      System.out.flush();
    }
    cluster.shutdown();
  }
}
